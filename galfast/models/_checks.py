"""Argument checks the models share: sizes (NumPy integers too) and rates, each refused with a
ValueError naming the argument rather than a TypeError from a comparison or from torch."""

from __future__ import annotations

import numbers
from typing import Any

from galfast._args import check_int


def size(name: str, value: Any, low: int = 1) -> int:
    """``value`` as an int of at least ``low``: Python's, NumPy's or a 0-d tensor's integer
    (torch refuses a NumPy integer as a size, a float fails deep inside it, and a bool is no
    size)."""
    return check_int(name, value, low)


def real(value: Any) -> bool:
    """Whether ``value`` is a real number (NumPy's too), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def rate(name: str, value: Any) -> float:
    """``value`` as a float in [0, 1) (a dropout probability, a label smoothing): NaN passes
    torch's own check of nn.Dropout and fails at the first forward; None and strings fail a
    comparison with a TypeError."""
    if not real(value) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must lie in [0, 1), got {value!r}")
    return float(value)
