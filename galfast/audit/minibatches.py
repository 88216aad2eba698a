"""The post-hoc attackers' optimizer and mini-batch order, shared by the fixed and the tuned
families. Attackers are small (a few thousand rows, heads of at most 3 x 256), so a step costs
about as much in per-call overhead as in arithmetic; both helpers cut calls, not arithmetic,
and leave every number as the plain loop computes it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch
from torch import Tensor

__all__ = ["Adam", "adam", "shuffled_batches"]

# torch.optim.Adam's defaults.
_BETA1, _BETA2, _EPS = 0.9, 0.999, 1e-8


class Adam:
    """``torch.optim.Adam(params, lr, weight_decay=weight_decay)``'s update, bitwise: the
    multi-tensor update of ``torch.optim.adam`` (its CPU path, step counts on the host), its
    ``_foreach`` calls with the same arguments in the same order. One call of each per step
    for all of a small model's parameters, without the optimizer's per-step bookkeeping
    (hooks, profiler ranges, state lookups) or the functional form's (argument checks,
    grouping by device, a step tensor per parameter read back each step), which together cost
    more than the update itself here."""

    def __init__(self, params: Iterable[Tensor], lr: float, weight_decay: float = 0.0) -> None:
        self.params = list(params)
        self.lr, self.weight_decay = lr, weight_decay
        self._exp_avgs = [
            torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params
        ]
        self._exp_avg_sqs = [
            torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params
        ]
        self._steps = [0] * len(self.params)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        # As torch.optim.Adam: parameters without a gradient are skipped (their state waits).
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not live:
            return
        params = [self.params[i] for i in live]
        grads = [p.grad for p in params]
        exp_avgs = [self._exp_avgs[i] for i in live]
        exp_avg_sqs = [self._exp_avg_sqs[i] for i in live]
        for i in live:
            self._steps[i] += 1
        steps = [float(self._steps[i]) for i in live]
        if self.weight_decay != 0:
            grads = torch._foreach_add(grads, params, alpha=self.weight_decay)
        torch._foreach_lerp_(exp_avgs, grads, 1 - _BETA1)
        torch._foreach_mul_(exp_avg_sqs, _BETA2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - _BETA2)
        step_size = [(self.lr / (1 - _BETA1**step)) * -1 for step in steps]
        bias_correction2_sqrt = [(1 - _BETA2**step) ** 0.5 for step in steps]
        denominator = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_div_(denominator, bias_correction2_sqrt)
        torch._foreach_add_(denominator, _EPS)
        torch._foreach_addcdiv_(params, exp_avgs, denominator, step_size)


def adam(params: Iterable[Tensor], lr: float, weight_decay: float = 0.0) -> Adam:
    """The attackers' optimizer: Adam with torch's defaults otherwise."""
    return Adam(params, lr, weight_decay)


def shuffled_batches(
    order: Tensor, batch_size: int, *tensors: Tensor
) -> Iterator[tuple[Tensor, ...]]:
    """The rows of ``tensors`` in batches of ``batch_size`` following ``order`` (a
    permutation): one gather per tensor per epoch, then contiguous slices, instead of a
    gather per batch. The batches hold the same rows in the same order."""
    shuffled = [t.index_select(0, order) for t in tensors]  # t[order], a plain gather
    for start in range(0, order.numel(), batch_size):
        yield tuple(t[start : start + batch_size] for t in shuffled)
