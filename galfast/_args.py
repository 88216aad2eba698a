"""The checks of non-tensor arguments (counts, seeds, rates, flags, mode names, devices) that
the whole API shares: each returns the value as the Python type the kernels and modules
take, or raises a ValueError naming the argument. NumPy scalars and
0-d tensors are taken; a bool is not a number here (True would read as 1) and a float is not
an int (2.5 would be truncated)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection
from typing import Any, Optional

import numpy as np
import torch
from torch import Tensor

from galfast._dtypes import as_int


def check_int(name: str, value: Any, low: int, high: Optional[int] = None) -> int:
    """``value`` as a Python int in ``[low, high)`` (no upper bound without ``high``): any
    integer type (NumPy's, as ``labels.max() + 1`` gives, a 0-d integer tensor's) but a bool;
    a float would be refused by torch deep inside, or silently truncated."""
    if type(value) is int and low <= value and (high is None or value < high):  # common case
        return value
    number = as_int(value)
    if number is None:
        raise ValueError(f"{name} must be an int, got {type(value).__name__}")
    if high is None:
        if number < low:
            raise ValueError(f"{name} must be >= {low}, got {number}")
    elif not low <= number < high:
        raise ValueError(f"{name} must lie in [{low}, {_shown(high)}), got {number}")
    return number


def plain_number(value: object) -> object:
    """A NumPy (or 0-d tensor) integer as an int, a NumPy float as a float; anything else as it
    is, for the caller's checks to judge (bools stay bools, to be refused as counts)."""
    number = as_int(value)
    if number is not None:
        return number
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, float)):
        return float(value)
    return value


def _shown(bound: int) -> str:
    """A large power of two as ``2**k`` (a seed's range reads [0, 2**63), not 19 digits)."""
    if bound >= 2**16 and bound & (bound - 1) == 0:
        return f"2**{bound.bit_length() - 1}"
    return str(bound)


def check_real(
    name: str, value: Any, low: Optional[float] = None, high: Optional[float] = None
) -> float:
    """``value`` as a finite Python float: any real number (an int, NumPy's, a 0-d tensor's)
    but a bool, in ``[low, high]`` where given. A string or None would fail a comparison with
    a TypeError, a NaN pass every range check, and a bool be read as 0 or 1. Traceable by
    torch.compile with ``dynamic=True``, where a float attribute is symbolic."""
    if isinstance(value, Tensor) and value.dim() == 0:
        value = value.item()  # a bool or complex tensor's item is refused below
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a finite number, got {type(value).__name__} {value!r}")
    try:
        number = float(value)
    except OverflowError:  # an int past float's range
        number = math.inf
    if not number - number == 0:  # NaN or infinite (math.isfinite cannot be traced)
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if (low is not None and number < low) or (high is not None and number > high):
        bounds = f"lie in [{low}, {high}]" if high is not None else f"be >= {low}"
        raise ValueError(f"{name} must {bounds}, got {value}")
    return number


def check_fraction(name: str, value: Any) -> float:
    """``value`` as a Python float in ``[0, 1)``, as :func:`check_real` takes it: a dropout
    probability, a label smoothing, a held-out share. Open at 1, where a dropout would zero
    every activation and a share would leave nothing to train on; NaN passes torch's own check
    of ``nn.Dropout`` and fails only at the first forward."""
    number = check_real(name, value)
    if not 0.0 <= number < 1.0:
        raise ValueError(f"{name} must lie in [0, 1), got {number}")
    return number


def check_flag(name: str, value: Any) -> bool:
    """``value`` as a Python bool: True or False (NumPy's too). Read by its truth, the string
    "False", None or a count in the wrong position (``GCNConv(16, 32, 2)``) would switch the
    option without a word."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ValueError(f"{name} must be a bool, got {type(value).__name__} {value!r}")


def check_device(device: Any) -> torch.device:
    """``device`` (a torch.device, a str such as ``"cuda:0"``, or an index >= 0 of any integer
    type) as a torch.device, for every ``.to`` and device argument of the API. torch.device raised
    a TypeError for None or 2.5 (an overload listing) and a RuntimeError for an unknown name;
    an accelerator that is absent still fails where torch says so."""
    if isinstance(device, torch.device):
        return device
    index = as_int(device)
    if index is not None and index >= 0:
        return torch.device(index)
    if isinstance(device, str):
        try:
            return torch.device(device)
        except RuntimeError:
            pass
    raise ValueError(
        "device must be a torch.device, a device name such as 'cpu' or 'cuda:0', or an index "
        f">= 0, got {device!r}"
    )


def check_choice(name: str, value: Any, choices: Collection) -> Optional[str]:
    """``value`` (a str, or None where None is a choice) when it is one of ``choices``: ``in``
    alone fails on an unhashable list against a dict's keys, and compares a NumPy array
    elementwise."""
    if value is None and None in choices:
        return None
    if isinstance(value, str) and value in choices:
        return str(value)
    raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")
