"""Figures: attacker score and task metric against lambda (95% CI bands), one column per
distance, like the paper's trade-off figures. Matplotlib with the Agg backend (no display)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from galfast.audit.metrics import METRIC_RANGE as ATTACK_METRIC_RANGE
from galfast.audit.metrics import clipped_interval
from galfast.cli.files import save_figure

__all__ = ["METRIC_RANGE", "figure_formats", "plot_tradeoff", "pyplot"]

# The values each metric can take, the attack metrics' and the task metrics': a confidence
# band is clipped to them (a mean ± half-width past 1.0 is not a score any run could have
# had), and a resumed sweep refuses a run record holding a value past them.
METRIC_RANGE: dict[str, tuple[float, Optional[float]]] = {**ATTACK_METRIC_RANGE, "mrr": (0.0, 1.0)}

# A task score that a guess reaches: the line the task axis is read against.
_TASK_CHANCE = {"auc": 0.5}


def pyplot():
    """matplotlib's pyplot on the Agg backend. Where HOME is not writable, matplotlib makes a
    temporary config folder and logs two lines of advice about it; that folder costs a
    command a fraction of a second (the font cache is built again) and is removed at exit
    (``run_and_exit`` runs the exit handlers), so the advice is left out."""
    matplotlib_log = logging.getLogger("matplotlib")
    matplotlib_log.addFilter(_config_folder_advice)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    finally:
        matplotlib_log.removeFilter(_config_folder_advice)
    return plt


def _config_folder_advice(record: logging.LogRecord) -> bool:
    """False for matplotlib's records about its config and cache folder, made on its import."""
    return record.funcName != "_get_config_or_cache_dir"


def figure_formats() -> tuple[str, ...]:
    """The file suffixes (without the dot) a figure can be saved as."""
    pyplot()
    from matplotlib.backend_bases import FigureCanvasBase

    return tuple(sorted(FigureCanvasBase.get_supported_filetypes()))


def plot_tradeoff(
    series: Mapping[str, Sequence[tuple[float, dict[str, Any]]]],
    path: os.PathLike,
    title: str = "",
    ci_over: str = "seeds",
) -> None:
    """``series``: distance -> [(lambda, :func:`~galfast.cli.summary.summarize_runs` output)]
    sorted by lambda. Top row: every audit attack's macro-F1 (its chance level, the best
    predictor that ignores the embeddings, dashed); bottom row: the task metric (with its
    chance level when it has one).
    Bands are 95% CIs over the ``ci_over`` each point's values come from, clipped to the
    metric's range. Writes the figure to ``path`` atomically."""
    plt = pyplot()
    columns = list(series)
    fig, axes = plt.subplots(
        2, len(columns), figsize=(4.5 * len(columns), 6), squeeze=False, sharex="col"
    )
    for col, distance in enumerate(columns):
        points = series[distance]
        lams = [lam for lam, _ in points]
        top, bottom = axes[0][col], axes[1][col]
        first = points[0][1]["attack"]
        # Continuous attributes (QM9's alpha) are scored by the attacker's MAE, not macro-F1.
        scored = "mae" if any("mae" in cells for cells in first.values()) else "macro_f1"
        for attack in first:
            # A point without the score: macro-F1 is undefined where the test split held one
            # class (galfast.audit.metrics).
            shown = [(lam, s["attack"][attack]) for lam, s in points]
            shown = [(lam, cells[scored]) for lam, cells in shown if scored in cells]
            if shown:
                at, stats = zip(*shown)
                _band(top, list(at), list(stats), f"{attack} attacker", scored, ci_over)
        chance = points[0][1]["attack"][next(iter(points[0][1]["attack"]))]["chance_macro_f1"]
        if chance is not None:
            top.axhline(chance, color="grey", linestyle="--", linewidth=1, label="chance")
        metric = points[0][1]["task_metric"]
        task = [s["task"] for _, s in points]
        _band(bottom, lams, task, f"task {metric}", metric, ci_over, color="black")
        if metric in _TASK_CHANCE:
            bottom.axhline(
                _TASK_CHANCE[metric],
                color="grey",
                linestyle="--",
                linewidth=1,
                label=f"chance ({metric} {_TASK_CHANCE[metric]:g})",
            )
        top.set_title(f"{title} {distance}".strip())
        top.set_ylabel("attacker macro-F1" if scored == "macro_f1" else f"attacker {scored}")
        bottom.set_ylabel(f"task {metric}")
        bottom.set_xlabel("lambda")
        if top.get_legend_handles_labels()[0]:  # no line where no attack had a score
            top.legend(fontsize=8)
        bottom.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def _band(ax, lams, stats, label, metric, ci_over, color=None) -> None:
    """Means with a line; where a point has a CI, the band, clipped to the metric's range.
    The legend says how many values the bands come from."""
    means = [s["mean"] for s in stats]
    half = [s["ci95"] or 0.0 for s in stats]
    counts = sorted({len(s.get("values", ())) for s in stats if s["ci95"] is not None})
    if counts:
        n = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
        label = f"{label} (95% CI, {n} {ci_over})"
    (line,) = ax.plot(lams, means, marker="o", label=label, color=color)
    bands = [clipped_interval(metric, m - h, m + h, METRIC_RANGE) for m, h in zip(means, half)]
    lower, upper = [low for low, _ in bands], [high for _, high in bands]
    ax.fill_between(lams, lower, upper, color=line.get_color(), alpha=0.2)
