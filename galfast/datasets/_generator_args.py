"""Argument checks the synthetic generators share, and the splits' held-out shares: a NaN or
infinite float passes a plain ``value < 0`` test and would silently give a NaN dataset (or an
endless draw); a float count fails deep inside NumPy; a size beyond memory allocates for
minutes or fails there."""

from __future__ import annotations

import math
import numbers
from typing import Any, Optional

import torch

from galfast._dtypes import as_int
from galfast.graph import _device_memory


def check_seed(seed: Any, limit: Optional[int] = None) -> int:
    """``seed`` as an int: any integer type (NumPy's too), not a bool, ``>= 0`` (and below
    ``limit`` where the consumer takes no more, e.g. ``torch.Generator``)."""
    value = as_int(seed)
    if value is None or value < 0 or (limit is not None and value >= limit):
        bound = ">= 0" if limit is None else f"in [0, 2**{limit.bit_length() - 1})"
        raise ValueError(f"seed must be an int {bound}, got {seed!r}")
    return value


def check_int(name: str, value: Any) -> int:
    """``value`` as an int: any integer type, not a bool or a float (NumPy fails on 10.0 deep
    inside, torch.arange(10.5) gives float ids). The caller checks the range."""
    count = as_int(value)
    if count is None:
        raise ValueError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    return count


def check_finite(**values: float) -> None:
    for name, value in values.items():
        # A str or None gave a TypeError from math.isfinite; a bool read as 0 or 1.
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueError(f"{name} must be a real number, got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value}")


def check_held_out(test_fraction: float, val_fraction: Optional[float] = None) -> None:
    """The held-out shares of a split: the rating builders' test share, the link splits' two.
    The generators check them before drawing too (seconds for ML-1M)."""
    if val_fraction is None:
        check_finite(test_fraction=test_fraction)
        if not 0 <= test_fraction < 1:
            raise ValueError(f"test_fraction must lie in [0, 1), got {test_fraction}")
        return
    check_finite(val_fraction=val_fraction, test_fraction=test_fraction)
    if not (0 <= val_fraction and 0 <= test_fraction and val_fraction + test_fraction < 1):
        raise ValueError(
            "val_fraction and test_fraction must be >= 0 with a sum below 1, got "
            f"{val_fraction} and {test_fraction}"
        )


def check_fits_memory(what: str, num_bytes: float) -> None:
    """Refuses sizes whose arrays alone exceed the machine's memory at once, instead of a
    MemoryError from deep inside NumPy, minutes of allocating, or the OOM killer."""
    memory = _device_memory(torch.device("cpu"))
    if memory is not None and num_bytes > memory:
        raise ValueError(
            f"{what}: these sizes need about {num_bytes / 2**30:.3g} GiB, more than the "
            f"{memory / 2**30:.1f} GiB of memory"
        )
