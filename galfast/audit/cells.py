"""Turning per-seed metrics of one (attribute, attack, attacker) cell into an AttackResult."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from galfast.audit.report import AttackResult
from galfast.audit.stats import summarize

__all__ = ["cell_result", "mean_metrics"]


def mean_metrics(per_seed: list[dict[str, Optional[float]]]) -> dict[str, float]:
    """Metric -> mean over the seeds where it is defined."""
    out = {}
    for name in per_seed[0]:
        values = [m[name] for m in per_seed if m[name] is not None]
        if values:
            out[name] = float(np.mean(values))
    return out


def cell_result(
    attr,
    attack: str,
    family: str,
    per_seed: list[dict[str, Optional[float]]],
    levels: tuple[dict[str, float], dict[str, float]],
    n_train: float,
    n_test: float,
    failures: float,
    config: dict[str, Any],
) -> AttackResult:
    """The cell's AttackResult; ``levels`` = (chance, majority) per metric."""
    summary = {}
    for name in per_seed[0]:
        values = [m[name] for m in per_seed if m[name] is not None]
        if values:
            summary[name] = summarize(values)
    return AttackResult(
        attr.name,
        attr.kind,
        attack,
        family,
        summary,
        levels[0],
        float(n_train),
        float(n_test),
        float(failures),
        config,
        levels[1],
    )
