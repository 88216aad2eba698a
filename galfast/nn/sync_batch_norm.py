"""Batch statistics over the rows of every process: :class:`~galfast.nn.BatchNorm` inside
:func:`synchronized_batch_norm` (the trainer's multi-process sampled steps).

Each process holds some rows of one global batch. The forward all-reduces, per channel, the
row count, the sum and the sum of squares (float64, one tensor), normalises the local rows by
the global mean and biased variance and moves the running buffers by the global statistics
(the variance unbiased over the global count, as torch does), so they stay identical on every
process. The backward all-reduces the per-channel sums of ``grad_y`` and ``grad_y * x_hat``,
from which each process gets the input gradient of its own rows. Every process must run the
same normalisations, forwards and backwards, in the same order (one with no rows too: it
contributes zeros).

Accuracy: the variance is ``E[x^2] - E[x]^2`` in float64, a relative error of about
``1e-16 (mean / std)^2``; fine for features and embeddings (float32 data keeps its 1e-7).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

__all__ = ["named_collective", "synchronized_batch_norm", "synchronizing", "sync_batch_norm"]


class _Sync:
    """The process group the statistics are reduced over (None: the default group)."""

    def __init__(self, group: Any) -> None:
        self.group = group


# A plain module global (not a ContextVar or a thread-local): torch.compile guards on it.
_active: Optional[_Sync] = None


@contextmanager
def synchronized_batch_norm(group: Any = None) -> Iterator[None]:
    """Within it, every :class:`galfast.nn.BatchNorm` normalising by batch statistics (training
    mode, or no running statistics) takes them over the rows of all processes of ``group``
    (a ``torch.distributed`` process group; None: the default one, which must be initialised).
    Its backward, wherever it runs, reduces over the same group."""
    global _active
    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError(
            "synchronized_batch_norm needs an initialised torch.distributed process group"
        )
    previous, _active = _active, _Sync(group)
    try:
        yield
    finally:
        _active = previous


@contextmanager
def named_collective(operation: str, rank: int, world_size: int) -> Iterator[None]:
    """Names the operation, this process and the likely cause when a collective fails:
    torch's own message (a closed connection, a timeout) says neither. Here, the lowest layer
    that issues collectives, so that the trainer's (galfast.train.distributed) share it."""
    try:
        yield
    except RuntimeError as error:  # gloo's timeouts are plain RuntimeErrors
        reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise type(error)(
            f"process {rank} of {world_size} lost the others in {operation}: another process "
            "failed or stopped calling the trainer (its own error says why), or did not reach "
            "this point within the process group's timeout (init_distributed(timeout=...)). "
            f"torch: {reason}"
        ) from error


def _all_reduce(values: Tensor, group: Any, operation: str) -> None:
    """``dist.all_reduce`` over ``group``, failing with the operation's name."""
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    with named_collective(f"BatchNorm across processes ({operation})", rank, world_size):
        dist.all_reduce(values, group=group)


def synchronizing() -> Optional[_Sync]:
    """The active :func:`synchronized_batch_norm`, if any."""
    return _active


def _compute_dtype(x: Tensor) -> torch.dtype:
    return torch.promote_types(x.dtype, torch.float32)


def _global_moments(rows: Tensor, group: Any) -> tuple[Tensor, Tensor, int]:
    """(mean, biased variance) per channel in float64 over every process's ``rows``
    ``[n, C]``, and the global row count."""
    channels = rows.size(1)
    with torch.no_grad():
        x64 = rows.detach().to(torch.float64)
        packed = torch.cat(
            [x64.sum(0), x64.square().sum(0), x64.new_full((1,), float(rows.size(0)))]
        )
        _all_reduce(packed, group, "the batch statistics of a forward")
    count = int(round(float(packed[-1])))
    mean = packed[:channels] / max(count, 1)
    var = (packed[channels : 2 * channels] / max(count, 1) - mean.square()).clamp_min(0.0)
    return mean, var, count


def _update_running(module: torch.nn.Module, mean: Tensor, var: Tensor, count: int) -> None:
    """torch's update of the running buffers, with the global statistics (in float64)."""
    if not (module.training and module.track_running_stats):
        return
    momentum = module.momentum
    if module.num_batches_tracked is not None:
        module.num_batches_tracked.add_(1)
        if momentum is None:  # cumulative moving average
            momentum = 1.0 / float(module.num_batches_tracked)
    momentum = 0.0 if momentum is None else float(momentum)
    with torch.no_grad():
        if module.running_mean is not None:
            moved = module.running_mean.double() * (1.0 - momentum) + mean * momentum
            module.running_mean.copy_(moved)
        if module.running_var is not None:
            unbiased = var * (count / (count - 1))
            moved = module.running_var.double() * (1.0 - momentum) + unbiased * momentum
            module.running_var.copy_(moved)


class _SyncBatchNormFunction(torch.autograd.Function):
    """y = x_hat * weight + bias on this process's rows ``[n, C]``, x_hat by the global
    statistics; the backward reduces two per-channel sums over the processes."""

    @staticmethod
    def forward(ctx, x, weight, bias, mean, invstd, count, group):
        dtype = _compute_dtype(x)
        x_hat = (x.to(dtype) - mean.to(dtype)) * invstd.to(dtype)
        y = x_hat
        if weight is not None:
            y = y * weight.to(dtype)
        if bias is not None:
            y = y + bias.to(dtype)
        ctx.save_for_backward(x, weight, mean, invstd)
        ctx.count, ctx.group = count, group
        ctx.bias_dtype = None if bias is None else bias.dtype
        return y.to(x.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_y):
        # The trainer scales process r's loss to W/N x (the sum of its items' losses): W
        # processes, N items in the global batch. Together the processes' grad_y are thus
        # the gradient of W x L (L: the global batch's mean loss) w.r.t. every row of the
        # global batch. BatchNorm's input gradient reads the other rows' grad_y only through
        # sum(grad_y) and sum(grad_y * x_hat) over all rows, so with those two reduced each
        # process gets d(W L)/dx for its own rows; the parameters behind x then collect, summed
        # over the processes, W dL/dtheta, and the trainer's gradient averaging divides by W:
        # the one-process gradient. weight and bias take the local sums for the same reason
        # (their per-process parts sum to W dL/dweight); reduced here, they would count W times.
        x, weight, mean, invstd = ctx.saved_tensors
        need_x, need_weight, need_bias = ctx.needs_input_grad[:3]
        dtype = _compute_dtype(x)
        g = grad_y.to(dtype)
        x_hat = (x.to(dtype) - mean.to(dtype)) * invstd.to(dtype)
        sum_g = g.sum(0, dtype=torch.float64)
        sum_gx = (g * x_hat).sum(0, dtype=torch.float64)
        grad_x = grad_weight = grad_bias = None
        if need_weight:
            grad_weight = sum_gx.to(weight.dtype)
        if need_bias:
            grad_bias = sum_g.to(ctx.bias_dtype)
        if need_x:
            # Every process takes this branch: x requires grad alike on all of them.
            sums = torch.cat([sum_g, sum_gx])
            _all_reduce(sums, ctx.group, "the gradient sums of a backward")
            channels = x.size(1)
            mean_g = (sums[:channels] / ctx.count).to(dtype)
            mean_gx = (sums[channels:] / ctx.count).to(dtype)
            scale = invstd.to(dtype)
            if weight is not None:
                scale = scale * weight.to(dtype)
            grad_x = ((g - mean_g - x_hat * mean_gx) * scale).to(x.dtype)
        return grad_x, grad_weight, grad_bias, None, None, None, None


def sync_batch_norm(
    x: Tensor, module: torch.nn.Module, sync: _Sync, allow_single_element: bool = False
) -> Tensor:
    """``module`` (a ``BatchNorm1d``) on this process's rows of x (``[n, C]`` or
    ``[n, C, L]``, any n >= 0) with the statistics of every process's rows; updates its
    running buffers. A global batch of at most one row (per channel) raises ValueError, or,
    with ``allow_single_element``, is normalised by the running statistics."""
    if not isinstance(x, Tensor) or x.dim() not in (2, 3) or x.size(1) != module.num_features:
        shape = list(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(
            f"BatchNorm({module.num_features}) expects [N, {module.num_features}] or "
            f"[N, {module.num_features}, L] input, got {shape}"
        )
    rows = x if x.dim() == 2 else x.transpose(1, 2).reshape(-1, x.size(1))
    mean, var, count = _global_moments(rows, sync.group)
    if count <= 1:
        if allow_single_element:  # as the one-process module: the running statistics
            m = module
            return F.batch_norm(
                x, m.running_mean, m.running_var, m.weight, m.bias, False, 0.0, m.eps
            )
        raise ValueError(
            "Expected more than 1 value per channel when training, got a global batch of "
            f"{count} over all processes (BatchNorm synchronised across processes)"
        )
    _update_running(module, mean, var, count)
    invstd = torch.rsqrt(var + float(module.eps))
    y = _SyncBatchNormFunction.apply(
        rows, module.weight, module.bias, mean, invstd, count, sync.group
    )
    if x.dim() == 3:
        y = y.reshape(x.size(0), x.size(2), x.size(1)).transpose(1, 2)
    return y
