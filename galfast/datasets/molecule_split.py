"""The paper's QM9 split and target normalisation statistics."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from galfast._args import check_int
from galfast._dtypes import holds_integers
from galfast.datasets._generator_args import check_fits_memory

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
    # Ints (10.5 molecules gave float ids; -5 failed in torch.arange), a seed torch.Generator
    # takes (2**64 overflowed it, 1.5 failed in it, -1 was taken), and an order that fits in
    # memory.
    num_molecules = check_int("num_molecules", num_molecules, 0)
    num_test, num_val = check_int("num_test", num_test, 0), check_int("num_val", num_val, 0)
    if seed is not None:
        seed = check_int("seed", seed, 0, 2**64)
    if num_test + num_val > num_molecules:
        raise ValueError(
            f"num_test={num_test} and num_val={num_val} must leave a training set "
            f"of {num_molecules} molecules"
        )
    check_fits_memory("paper_split", 16 * num_molecules)
    if seed is None:
        order = torch.arange(num_molecules)
    else:
        order = torch.randperm(num_molecules, generator=torch.Generator().manual_seed(seed))
    test, val = order[:num_test], order[num_test : num_test + num_val]
    return order[num_test + num_val :], val, test


def _check_finite(rows: Tensor, index: Tensor) -> None:
    """One NaN or infinite target made the statistics NaN, and so every normalised target."""
    finite = torch.isfinite(rows).reshape(rows.size(0), -1).all(1)
    if not bool(finite.all()):
        position = int((~finite).nonzero()[0])
        row = int(index.nonzero()[position]) if index.dtype == torch.bool else int(index[position])
        raise ValueError(
            f"y row {row} holds a NaN or infinite target: drop it from index (or fill it) "
            "before taking the statistics"
        )


def target_statistics(y: Tensor, index: Tensor) -> tuple[Tensor, Tensor]:
    """Mean and (unbiased) standard deviation of the rows ``y[index]``, per column: pass the
    training indices so no validation or test target leaks into the normalisation. (PyG's
    ``qm9_nn_conv.py`` takes them over all 130,831 molecules; pass ``torch.arange(len(y))``
    to match it.) Normalise with ``(y - mean) / std``; predictions map back with
    ``pred * std + mean``."""
    if not isinstance(y, Tensor) or not isinstance(index, Tensor):
        raise ValueError(
            f"y and index must be a torch.Tensor, got {type(y).__name__} and {type(index).__name__}"
        )
    if y.dim() == 0:  # else an IndexError from y.size(0)
        raise ValueError("y must have a row per molecule, got a 0-d tensor")
    if index.dim() != 1 or not (holds_integers(index) or index.dtype == torch.bool):
        raise ValueError(
            f"index must be 1-D integer ids or a bool mask, got {index.dtype} of shape "
            f"{list(index.shape)}"
        )
    if holds_integers(index) and index.numel():
        low, high = (int(v) for v in torch.aminmax(index))
        if low < 0 or high >= y.size(0):  # a negative id silently read from the end
            bad = low if low < 0 else high
            raise ValueError(f"index holds {bad}, which is not a row of y ({y.size(0)} rows)")
    rows = y[index].to(torch.float64)
    if rows.size(0) < 2:  # counted after a bool mask selects its rows (one row: a NaN std)
        raise ValueError("target statistics need at least two molecules")
    _check_finite(rows, index)
    # Integer targets get float statistics: cast back they were truncated (std 0 or 1).
    dtype = y.dtype if y.is_floating_point() else torch.get_default_dtype()
    return rows.mean(0).to(dtype), rows.std(0).to(dtype)
