"""The audit's argument checks: a count, shared by :func:`~galfast.audit.audit` and
:class:`~galfast.audit.SearchConfig` (which cannot import the other without a cycle), and the
embeddings' range, shared with the ``galfast audit`` command."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from galfast._dtypes import as_int

__all__ = ["check_standardisable", "count"]


def count(name: str, value: object, minimum: int) -> int:
    """``value`` as an int; ValueError naming ``name`` unless it is an integer (not a bool, nor
    a float such as 1.5, NaN or infinity) >= ``minimum``."""
    number = as_int(value)
    if number is None or number < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return number


def check_standardisable(name: str, z: Tensor, dtype: torch.dtype) -> None:
    """ValueError naming ``name`` unless the attackers can standardise every column of ``z``
    ``[N, D]`` in ``dtype``: a column's squared deviations from its mean, summed over the N
    rows, must stay below the dtype's largest value, or its std is inf and the column reads as
    0 (k-NN then reported no leak at all)."""
    limit = math.sqrt(torch.finfo(dtype).max / (4 * z.size(0)))
    low, high = torch.aminmax(z)  # no |z| copy of a large embedding matrix
    largest = max(-float(low), float(high))
    if largest > limit:
        raise ValueError(
            f"{name}: values up to {largest:.3g} overflow the attackers' "
            f"{str(dtype).replace('torch.', '')} statistics (at most {limit:.3g} for "
            f"{z.size(0)} rows); rescale them"
        )
