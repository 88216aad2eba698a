"""Plain-PyTorch reference for galfast.ops.gather_rows (tests only): the rows one by one, and
the gradient as a loop adding each picked row into its zeroed destination in index order."""

from __future__ import annotations

import torch
from torch import Tensor


def gather_rows_ref(x: Tensor, index: Tensor) -> Tensor:
    """out[k] = x[index[k]], ``[K, *x.shape[1:]]``."""
    rows = [x[int(i)] for i in index.tolist()]
    return torch.stack(rows) if rows else x.new_empty((0, *x.shape[1:]))


def scatter_add_rows_ref(grad: Tensor, index: Tensor, num_rows: int) -> Tensor:
    """out[r] = sum of grad[k] over k with index[k] == r, added one by one in increasing k
    from zero (so its rounding is that of a sequential index_add_)."""
    out = grad.new_zeros((num_rows, *grad.shape[1:]))
    for k, r in enumerate(index.tolist()):
        out[r] = out[r] + grad[k]
    return out
