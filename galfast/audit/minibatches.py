"""The post-hoc attackers' optimizer and mini-batch order, shared by the fixed and the tuned
families. Attackers are small (a few thousand rows, heads of at most 3 x 256), so a step costs
about as much in per-call overhead as in arithmetic; both helpers cut calls, not arithmetic,
and leave every number as the plain loop computes it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch
from torch import Tensor
from torch.optim.adam import adam as adam_update

__all__ = ["Adam", "adam", "shuffled_batches"]


class Adam:
    """``torch.optim.Adam(params, lr, weight_decay=weight_decay)``'s update, bitwise, through
    its functional form (``torch.optim.adam.adam``, multi-tensor): one call per step for
    all of a small model's parameters, without the optimizer wrapper's per-step bookkeeping
    (hooks, profiler ranges, state lookups), which costs as much as the update itself here."""

    def __init__(self, params: Iterable[Tensor], lr: float, weight_decay: float = 0.0) -> None:
        self.params = list(params)
        self.lr, self.weight_decay = lr, weight_decay
        self._exp_avgs = [
            torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params
        ]
        self._exp_avg_sqs = [
            torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params
        ]
        # torch.optim.Adam keeps each step count as a CPU scalar of the default float type.
        step_dtype = torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32
        self._steps = [torch.tensor(0.0, dtype=step_dtype) for _ in self.params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        # As torch.optim.Adam: parameters without a gradient are skipped (their state waits).
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        with torch.no_grad():
            adam_update(
                [self.params[i] for i in live],
                [self.params[i].grad for i in live],
                [self._exp_avgs[i] for i in live],
                [self._exp_avg_sqs[i] for i in live],
                [],
                [self._steps[i] for i in live],
                foreach=True,
                amsgrad=False,
                beta1=0.9,
                beta2=0.999,
                lr=self.lr,
                weight_decay=self.weight_decay,
                eps=1e-8,
                maximize=False,
            )


def adam(params: Iterable[Tensor], lr: float, weight_decay: float = 0.0) -> Adam:
    """The attackers' optimizer: Adam with torch's defaults otherwise."""
    return Adam(params, lr, weight_decay)


def shuffled_batches(
    order: Tensor, batch_size: int, *tensors: Tensor
) -> Iterator[tuple[Tensor, ...]]:
    """The rows of ``tensors`` in batches of ``batch_size`` following ``order`` (a
    permutation): one gather per tensor per epoch, then contiguous slices, instead of a
    gather per batch. The batches hold the same rows in the same order."""
    shuffled = [t[order] for t in tensors]
    for start in range(0, order.numel(), batch_size):
        yield tuple(t[start : start + batch_size] for t in shuffled)
