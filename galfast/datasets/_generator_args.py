"""Argument checks the synthetic generators share: a NaN or infinite float passes a plain
``value < 0`` test and would silently give a NaN dataset (or an endless draw)."""

from __future__ import annotations

import math


def check_seed(seed: int) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")


def check_finite(**values: float) -> None:
    for name, value in values.items():
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value}")
