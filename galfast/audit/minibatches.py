"""The post-hoc attackers' optimizer and mini-batch order, shared by the fixed and the tuned
families. Attackers are small (a few thousand rows, heads of at most 3 x 256), so a step costs
about as much in per-call overhead as in arithmetic; both helpers cut calls, not arithmetic,
and leave every number as the plain loop computes it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch
from torch import Tensor

__all__ = ["adam", "shuffled_batches"]


def adam(params: Iterable[Tensor], lr: float, weight_decay: float = 0.0) -> torch.optim.Adam:
    """Adam with its multi-tensor update: one call per step for all of a small model's
    parameters instead of one Python pass per tensor (bitwise the same update)."""
    return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, foreach=True)


def shuffled_batches(
    order: Tensor, batch_size: int, *tensors: Tensor
) -> Iterator[tuple[Tensor, ...]]:
    """The rows of ``tensors`` in batches of ``batch_size`` following ``order`` (a
    permutation): one gather per tensor per epoch, then contiguous slices, instead of a
    gather per batch. The batches hold the same rows in the same order."""
    shuffled = [t[order] for t in tensors]
    for start in range(0, order.numel(), batch_size):
        yield tuple(t[start : start + batch_size] for t in shuffled)
