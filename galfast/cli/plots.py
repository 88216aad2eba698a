"""Figures: attacker score and task metric against lambda (95% CI bands), one column per
distance, like the paper's trade-off figures. Matplotlib with the Agg backend (no display)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["plot_tradeoff", "pyplot"]


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_tradeoff(
    series: Mapping[str, Sequence[tuple[float, dict[str, Any]]]],
    path: os.PathLike,
    title: str = "",
) -> None:
    """``series``: distance -> [(lambda, :func:`~galfast.cli.summary.summarize_runs` output)]
    sorted by lambda. Top row: every audit attack's macro-F1 (with the majority-class
    baseline dashed); bottom row: the task metric. Writes a PNG to ``path``."""
    plt = pyplot()
    columns = list(series)
    fig, axes = plt.subplots(
        2, len(columns), figsize=(4.5 * len(columns), 6), squeeze=False, sharex="col"
    )
    for col, distance in enumerate(columns):
        points = series[distance]
        lams = [lam for lam, _ in points]
        top, bottom = axes[0][col], axes[1][col]
        for attack in points[0][1]["attack"]:
            stats = [s["attack"][attack]["macro_f1"] for _, s in points]
            _band(top, lams, stats, f"{attack} attacker")
        chance = points[0][1]["attack"][next(iter(points[0][1]["attack"]))]["chance_macro_f1"]
        if chance is not None:
            top.axhline(chance, color="grey", linestyle="--", linewidth=1, label="majority class")
        metric = points[0][1]["task_metric"]
        _band(bottom, lams, [s["task"] for _, s in points], f"task {metric}", color="black")
        top.set_title(f"{title} {distance}".strip())
        top.set_ylabel("attacker macro-F1")
        bottom.set_ylabel(f"task {metric}")
        bottom.set_xlabel("lambda")
        top.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.fspath(path), dpi=120)
    plt.close(fig)


def _band(ax, lams, stats, label, color=None) -> None:
    means = [s["mean"] for s in stats]
    half = [s["ci95"] or 0.0 for s in stats]
    (line,) = ax.plot(lams, means, marker="o", label=label, color=color)
    ax.fill_between(
        lams,
        [m - h for m, h in zip(means, half)],
        [m + h for m, h in zip(means, half)],
        color=line.get_color(),
        alpha=0.2,
    )
