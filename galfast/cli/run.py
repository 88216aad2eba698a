"""``galfast run``: train and audit one setting over several seeds; print a table, write JSON."""

from __future__ import annotations

import argparse

from galfast.audit.report import score_text
from galfast.cli.dataset_files import check_spares_the_dataset
from galfast.cli.files import check_writable, write_json
from galfast.cli.options import (
    add_experiment_options,
    config_kwargs,
    experiment_config,
    nonnegative_float,
    path_name,
    prepare_checked,
)
from galfast.cli.summary import by_attribute, format_table, lambda_text, summarize_runs
from galfast.experiments import ExperimentConfig, run_experiment
from galfast.experiments.runner import start_audit_worker
from galfast.gal.adversary_losses import DISTANCES

__all__ = ["add_parser", "main"]

DESCRIPTION = """\
Train an encoder with GAL at one lambda for --seeds seeds, measure the task on held-out data
and audit the embeddings with post-hoc attackers. Prints mean ± 95% CI over seeds.

Planetoid setup (cora, citeseer, pubmed, synthetic-graph): link prediction (dot-product
decoder, one negative per edge), 2 layers 128/64, Adam 0.01, 150 epochs; task = test ROC-AUC;
attribute = document class, attacker macro-F1 (80 attacker epochs). PubMed runs
structure-only (learned node embeddings) when its features are missing.

MovieLens setup (movielens-1m, movielens-100k, synthetic-movielens-1m: a stand-in for ML-1M
with its statistics and its level of gender leak; synthetic-movielens: any size, easier
leak): embedding 20 +
BatchNorm + one GNN layer, bilinear decoder with 2 bases over 5 ratings, 25 epochs of 8,192
ratings, an adversary step on 256 users after each task step, attacker 30 epochs; task = test
RMSE. For the binary gender attribute, compare balanced_accuracy with the paper's "AUC"
column (the paper thresholded predictions); auc is the ranking ROC-AUC. MovieLens graphs keep
rated movies only, as the paper counts them (--option unrated_movies=keep keeps all).

QM9 setup (qm9, --encoder mpnn): the MPNN (NNConv + GRU + Set2Set, dim 64) on complete graphs
with distances, task = dipole moment mu (normalised with training statistics), Adam 0.001,
40 epochs of 128 molecules; the adversary regresses the polarizability alpha from the Set2Set
readout; first 10,000 molecules (after a fixed shuffle) test, next 10,000 validation. Task =
test MAE of mu (Debye) at the best validation epoch; attribute = alpha, attacker MAE (bohr^3,
30 attacker epochs, trained on the training molecules, scored on the test ones); only the
node attack applies. Data: --option source=qm9pack (offline) or source=canonical.
"""


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "run",
        help="train and audit one setting over seeds",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_experiment_options(parser)
    parser.add_argument("--distance", choices=DISTANCES, default="tv", help="GAL distance")
    parser.add_argument(
        "--lam", type=nonnegative_float, default=0.0, help="trade-off lambda (0 = no defence)"
    )
    parser.add_argument(
        "--out", type=path_name, default=None, help="write every run and the summary here (JSON)"
    )
    parser.set_defaults(handler=main)
    return parser


def worst_case_line(case: dict) -> str:
    """One line for a record's strongest attacker: who, on what, how well, against chance
    (the best predictor that ignores the embeddings) and the constant predictor (the majority
    class, or the mean for a continuous attribute scored by MAE / RMSE)."""
    # No interval for one audit seed; no score where the test split held one class.
    ci = "n/a" if case["ci"] is None else "-".join(f"{v:.3f}" for v in case["ci"])
    constant = "mean" if case["metric"] in ("mae", "rmse") else "majority"
    return (
        f"{case['attribute']}: {case['attacker']} on {case['attack']}, {case['metric']} "
        f"{score_text(case['mean'])} (95% CI {ci}; chance {score_text(case['chance'])}; "
        f"{constant} {score_text(case['majority'])}; {case['strength']} audit)"
    )


def main(args: argparse.Namespace) -> int:
    def config(seed: int) -> ExperimentConfig:
        return experiment_config(
            **config_kwargs(args), distance=args.distance, lam=args.lam, seed=seed
        )

    # Seed 0's config stands for all (they differ by seed only); the others are built as they
    # train, so a large --seeds starts training at once instead of filling the memory first.
    first = config(0)
    if args.out:
        check_writable(args.out, "--out")
    # The audit's scikit-learn worker imports it while the dataset loads (on the idle core).
    start_audit_worker(first)
    prepare_checked(first)
    if args.out:
        check_spares_the_dataset([args.out], "--out", first)
    records = [
        run_experiment(config(seed), progress=not args.quiet).record for seed in range(args.seeds)
    ]
    for note in records[0]["notes"]:
        print(f"note: {note}")
    summaries = {}
    for attribute, runs in by_attribute(records).items():
        summaries[attribute] = summary = summarize_runs(runs)
        lead = {
            "dataset": args.dataset,
            "encoder": args.encoder,
            "distance": args.distance,
            "lambda": lambda_text(args.lam),
            "attribute": attribute,
        }
        print(format_table([(lead, summary)]))
        for seed, run in enumerate(runs):
            for case in run["audit"].get("worst_case", []):
                print(f"strongest attack (seed {seed}): {worst_case_line(case)}")
    if args.out:
        primary = next(iter(summaries.values()))
        write_json(args.out, {"summary": primary, "summaries": summaries, "runs": records})
        print(f"wrote {args.out}")
    return 0
