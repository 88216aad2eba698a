"""``galfast sweep``: the lambda x distance x seed grid, one JSON file per run, resumable."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from galfast.cli.dataset_files import check_spares_the_dataset
from galfast.cli.errors import UsageError, error_line
from galfast.cli.files import check_folder_writable, check_writable, write_csv, write_json
from galfast.cli.options import (
    add_experiment_options,
    comma_list,
    config_kwargs,
    experiment_config,
    float_list,
    path_name,
    prepare_checked,
)
from galfast.cli.plots import plot_tradeoff
from galfast.cli.run_records import diverged_mark, diverged_path, finished_record, mark_diverged
from galfast.cli.summary import (
    ATTACK_METRICS,
    by_attribute,
    format_table,
    lambda_text,
    summarize_runs,
)
from galfast.experiments import ExperimentConfig, TrainingDiverged, run_experiment
from galfast.gal.adversary_losses import DISTANCES

__all__ = ["add_parser", "main", "run_path"]

DESCRIPTION = """\
Run every (distance, lambda, seed) of a grid with the setup of `galfast run`. Each run is
written atomically to OUT/runs/<dataset>-<encoder>[-<attribute>]-<pairing>-<distance>-lam<L>
[-adv<N><schedule>][-pre<N>][-joint]-seed<S>.json (the bracketed parts only where not the
default); a re-run skips the runs whose file exists with the same settings, so an interrupted
sweep resumes; a run file that is not a valid run record (not written by galfast, or edited)
is trained again. A run whose training diverges (a lambda too large) gets no run file but a
mark, <run>.diverged.json: the sweep goes on, summarises the runs that finished, names the
diverged ones and exits with status 1; a re-run does not train a marked run again (the same
seeded run diverges again), it names it again. Delete the mark to train that run again.
Writes OUT/summary.json, OUT/summary.csv (mean and 95% CI per distance, lambda and hidden
attribute) and OUT/tradeoff.png (attacker macro-F1 and task metric against lambda, one column
per distance); with several attributes (--attribute gender,age) one OUT/tradeoff-<attribute>.png
each.
"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "sweep",
        help="lambda x distance x seed grid with plots",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_experiment_options(parser)
    parser.add_argument(
        "--lam",
        type=float_list,
        default=[0.0, 0.5, 1.0, 2.0, 4.0],
        help="comma-separated lambdas",
    )
    parser.add_argument(
        "--distance",
        type=comma_list(DISTANCES),
        default=list(DISTANCES),
        help="comma-separated distances",
    )
    parser.add_argument("--out", type=path_name, required=True, help="output folder")
    parser.set_defaults(handler=main)
    return parser


def run_path(out: Path, config: ExperimentConfig) -> Path:
    pairing = config.pairing.replace(":", "")
    schedule = ""  # only a non-default adversary schedule shows in the name
    if (config.adv_every, config.adv_schedule) != (1, "after"):
        schedule += f"-adv{config.adv_every}{config.adv_schedule}"
    if config.pretrain_epochs:
        schedule += f"-pre{config.pretrain_epochs}"
    if config.adv_update != "separate":
        schedule += f"-{config.adv_update}"
    # Only a non-default attribute shows in the name, so older sweeps resume under theirs.
    attribute = "" if config.attribute is None else f"-{config.attribute.replace(',', '+')}"
    name = (
        f"{config.dataset}-{config.encoder}{attribute}-{pairing}-{config.distance}-"
        f"lam{lambda_text(config.lam)}{schedule}-seed{config.seed}.json"
    )
    return out / "runs" / name


def main(args: argparse.Namespace) -> int:
    out = Path(args.out)
    grid = [
        experiment_config(**config_kwargs(args), distance=d, lam=lam, seed=seed)
        for d in args.distance
        for lam in args.lam
        for seed in range(args.seeds)
    ]
    check_folder_writable(out / "runs", "--out")
    attributes = grid[0].attribute_names
    outputs = [out / name for name in ("summary.json", "summary.csv", *_plot_names(attributes))]
    for config in grid:
        outputs += [run_path(out, config), diverged_path(run_path(out, config))]
    for path in outputs:
        check_writable(path, "--out")
    # The largest lambda's settings are the strictest (a defended run needs adversary steps).
    prepared = prepare_checked(max(grid, key=lambda config: config.lam))
    check_spares_the_dataset(outputs, "--out", grid[0])
    records: dict[tuple[str, float], list[dict[str, Any]]] = {}
    trained = skipped = 0
    diverged: list[str] = []  # one line each: the run's file name and why
    for config in tqdm(grid, desc="sweep", unit="run", disable=args.quiet):
        path = run_path(out, config)
        record = finished_record(path, config, prepared)
        if record is None and (why := diverged_mark(path, config)) is not None:
            diverged.append(f"{path.stem}: {why} (marked in an earlier sweep)")
            continue
        if record is None:
            try:
                record = run_experiment(config, progress=not args.quiet).record
            except TrainingDiverged as error:
                # One lambda past the floats' range must not cost the rest of the grid.
                diverged.append(f"{path.stem}: {error_line(error)}")
                mark_diverged(path, config, error_line(error))
                continue
            write_json(path, record)
            diverged_path(path).unlink(missing_ok=True)  # a mark of other settings
            trained += 1
        else:
            skipped += 1
        records.setdefault((config.distance, config.lam), []).append(record)
    print(
        f"{trained} run(s) trained, {skipped} finished run(s) skipped"
        + (f", {len(diverged)} diverged" if diverged else "")
    )
    if not records:
        raise UsageError(f"every run diverged ({len(diverged)}), the first: {diverged[0]}")

    summaries = {
        (d, lam, attribute): summarize_runs(runs)
        for (d, lam), setting in records.items()
        for attribute, runs in by_attribute(setting).items()
    }
    for attribute in dict.fromkeys(a for _, _, a in summaries):
        rows = [
            (
                {
                    "distance": d,
                    "lambda": lambda_text(lam),
                    "encoder": args.encoder,
                    "attribute": a,
                },
                s,
            )
            for (d, lam, a), s in summaries.items()
            if a == attribute
        ]
        print(format_table(rows))
    write_json(
        out / "summary.json",
        [
            {"distance": d, "lambda": lam, "attribute": a, **s}
            for (d, lam, a), s in summaries.items()
        ],
    )
    write_csv(out / "summary.csv", _csv_rows(summaries))
    written = [out / "summary.json", out / "summary.csv"]
    plots = dict(zip(dict.fromkeys(a for _, _, a in summaries), _plot_names(attributes)))
    for attribute, plot_name in plots.items():
        series: dict[str, list] = {}
        for (d, lam, a), s in summaries.items():
            if a == attribute:
                series.setdefault(d, []).append((lam, s))
        plot_tradeoff(
            {d: sorted(points, key=lambda p: p[0]) for d, points in series.items()},
            out / plot_name,
            title=f"{args.dataset} {args.encoder}: {attribute}",
            ci_over="training seeds",
        )
        written.append(out / plot_name)
    print(f"wrote {', '.join(map(str, written))}")
    for line in diverged:
        print(f"galfast sweep: diverged, not in the summaries: {line}", file=sys.stderr)
    return 1 if diverged else 0


def _plot_names(attributes: tuple[str, ...]) -> list[str]:
    """The trade-off plots' file names: one plot, or one per attribute hidden jointly."""
    if len(attributes) <= 1:
        return ["tradeoff.png"]
    return [f"tradeoff-{name}.png" for name in attributes]


def _csv_rows(summaries: dict) -> list[dict[str, Any]]:
    rows = []
    for (distance, lam, attribute), s in summaries.items():
        row = {
            "distance": distance,
            "lambda": lam,
            "attribute": attribute,
            "runs": s["n"],
            f"task_{s['task_metric']}": s["task"]["mean"],
            f"task_{s['task_metric']}_ci95": s["task"]["ci95"],
        }
        for attack, metrics in s["attack"].items():
            for name in ATTACK_METRICS:
                if name in metrics:
                    row[f"{attack}_{name}"] = metrics[name]["mean"]
                    row[f"{attack}_{name}_ci95"] = metrics[name]["ci95"]
        rows.append(row)
    return rows
