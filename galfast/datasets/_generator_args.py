"""The checks of the generators and loaders that are about datasets rather than single values
(those go through :mod:`galfast._args`): the two held-out shares of a link split, and sizes
whose arrays would not fit in memory, checked before drawing instead of allocating for minutes
or failing deep inside NumPy."""

from __future__ import annotations

from typing import Any

import torch

from galfast._args import check_fraction
from galfast.graph import _device_memory


def check_held_out(val_fraction: Any, test_fraction: Any) -> tuple[float, float]:
    """``(val_fraction, test_fraction)`` as floats: the held-out shares of the link splits,
    each in ``[0, 1)`` and their sum below 1 so that edges remain to train on. The generators
    check them before drawing (seconds for ML-1M); a single share goes through
    :func:`galfast._args.check_fraction`."""
    val = check_fraction("val_fraction", val_fraction)
    test = check_fraction("test_fraction", test_fraction)
    if val + test >= 1:
        raise ValueError(
            f"val_fraction and test_fraction must have a sum below 1, got {val} and {test}"
        )
    return val, test


def check_fits_memory(what: str, num_bytes: float) -> None:
    """Refuses sizes whose arrays alone exceed the machine's memory at once, instead of a
    MemoryError from deep inside NumPy, minutes of allocating, or the OOM killer."""
    memory = _device_memory(torch.device("cpu"))
    if memory is not None and num_bytes > memory:
        raise ValueError(
            f"{what}: these sizes need about {num_bytes / 2**30:.3g} GiB, more than the "
            f"{memory / 2**30:.1f} GiB of memory"
        )
