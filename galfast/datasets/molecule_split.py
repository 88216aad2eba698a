"""The paper's QM9 split and target normalisation statistics."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

__all__ = ["paper_split", "target_statistics"]


def paper_split(
    num_molecules: int,
    *,
    num_test: int = 10_000,
    num_val: int = 10_000,
    seed: Optional[int] = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """``(train, val, test)`` int64 molecule indices: the first `num_test` molecules for test,
    the next `num_val` for validation, the rest for training (the paper's QM9 split).

    With ``seed=None`` "first" means the dataset's (PyG's) order. PyG's ``qm9_nn_conv.py``,
    which the paper's code follows, shuffles the dataset first (unseeded); a `seed` gives that
    shuffle reproducibly: the order is a seeded permutation, then cut the same way.
    """
    if num_test < 0 or num_val < 0 or num_test + num_val > num_molecules:
        raise ValueError(
            f"num_test={num_test} and num_val={num_val} must be >= 0 and leave a training set "
            f"of {num_molecules} molecules"
        )
    if seed is None:
        order = torch.arange(num_molecules)
    else:
        order = torch.randperm(num_molecules, generator=torch.Generator().manual_seed(seed))
    test, val = order[:num_test], order[num_test : num_test + num_val]
    return order[num_test + num_val :], val, test


def target_statistics(y: Tensor, index: Tensor) -> tuple[Tensor, Tensor]:
    """Mean and (unbiased) standard deviation of the rows ``y[index]``, per column: pass the
    training indices so no validation or test target leaks into the normalisation. (PyG's
    ``qm9_nn_conv.py`` takes them over all 130,831 molecules; pass ``torch.arange(len(y))``
    to match it.) Normalise with ``(y - mean) / std``; predictions map back with
    ``pred * std + mean``."""
    if index.numel() < 2:
        raise ValueError("target statistics need at least two molecules")
    rows = y[index].to(torch.float64)
    return rows.mean(0).to(y.dtype), rows.std(0).to(y.dtype)
