"""BatchNorm over node features on galfast's fused CPU kernel."""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from galfast._args import check_flag, check_int, check_real
from galfast.nn.sync_batch_norm import sync_batch_norm, synchronizing
from galfast.ops.batch_norm import fused_batch_norm, update_running

__all__ = ["BatchNorm"]

_FUSED_DTYPES = (torch.float32, torch.float64)
# What BatchNorm1d saves: galfast's BatchNorm was one itself, so its old checkpoints hold these
# names where PyG's layout (and this one) has "module.<name>".
_STATE_NAMES = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")


class BatchNorm(torch.nn.Module):
    r"""PyG's ``BatchNorm`` (same arguments, ``state_dict`` and behaviour): a
    ``torch.nn.BatchNorm1d`` held as ``module``, whose training-mode forward on a 2-D CPU input
    runs :func:`galfast.ops.batch_norm`: the ``[N, C]`` node features of a GNN, normalised per
    channel over the N nodes.

    In training mode (or in eval mode without running statistics) the running buffers update
    exactly as torch does: ``num_batches_tracked += 1``, then
    ``running = (1 - m) running + m batch`` with the unbiased batch variance, ``m`` the momentum
    or, for ``momentum=None``, ``1 / num_batches_tracked``. Everything else — eval mode with
    running statistics, CUDA, 3-D inputs, half types, fewer than 2 rows — runs
    ``BatchNorm1d.forward`` itself.

    torch's CPU kernel strides over the N rows once per channel and slows down with a second
    thread on inputs of this shape; the fused kernel reads the rows in order, accumulates the
    statistics in double and gives the same bits for any thread count (float32 results differ
    from torch's at rounding level).

    Inside :func:`galfast.nn.sync_batch_norm.synchronized_batch_norm` (which the trainer's
    multi-process sampled steps enter around the encoder) a forward that uses batch statistics
    takes them over the rows of every process, and updates the running buffers with them, so
    they stay identical on every process (see :mod:`galfast.nn.sync_batch_norm`).

    Checkpoints of galfast's earlier ``BatchNorm`` (a ``BatchNorm1d`` itself, keys without
    ``module.``) and of a plain ``BatchNorm1d`` load too.

    Args:
        in_channels: features per node.
        eps, momentum, affine, track_running_stats: as ``torch.nn.BatchNorm1d`` (``eps`` at
            least 0, ``momentum`` in [0, 1] or None).
        allow_single_element: normalise a batch of one row by the running statistics (as in
            eval mode) instead of failing; needs ``track_running_stats``. Default False.
        device: as ``torch.nn.BatchNorm1d``.
        **kwargs: further arguments of ``torch.nn.BatchNorm1d`` (e.g. ``dtype``).

    Example:
        >>> norm = BatchNorm(20)
        >>> norm(torch.randn(9746, 20)).shape
        torch.Size([9746, 20])
    """

    def __init__(
        self,
        in_channels: int,
        eps: float = 1e-5,
        momentum: Optional[float] = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        allow_single_element: bool = False,
        device: Optional[torch.device] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        # torch reads a string eps or a bool flag without a word, or fails deep inside.
        in_channels = check_int("in_channels", in_channels, 0)
        eps = check_real("eps", eps, 0.0)
        # Outside [0, 1] the running statistics would overshoot the batch's every step.
        momentum = None if momentum is None else check_real("momentum", momentum, 0.0, 1.0)
        affine = check_flag("affine", affine)
        track_running_stats = check_flag("track_running_stats", track_running_stats)
        allow_single_element = check_flag("allow_single_element", allow_single_element)
        if allow_single_element and not track_running_stats:
            raise ValueError(
                "allow_single_element requires track_running_stats=True (a single row is "
                "normalised by the running statistics)"
            )
        self.module = _FusedBatchNorm1d(
            in_channels, eps, momentum, affine, track_running_stats, device=device, **kwargs
        )
        self.in_channels = in_channels
        self.allow_single_element = allow_single_element

    def reset_running_stats(self) -> None:
        self.module.reset_running_stats()

    def reset_parameters(self) -> None:
        self.module.reset_parameters()

    def forward(self, x: Tensor) -> Tensor:
        sync = synchronizing()
        if sync is not None and self.module.uses_batch_stats():
            return sync_batch_norm(x, self.module, sync, self.allow_single_element)
        if self.allow_single_element and x.size(0) <= 1:
            # PyG: one row has no batch variance, so it is normalised as in eval mode.
            m = self.module
            return F.batch_norm(
                x, m.running_mean, m.running_var, m.weight, m.bias, False, 0.0, m.eps
            )
        return self.module(x)

    def __prepare_scriptable__(self) -> torch.nn.Module:
        """What ``torch.jit.script`` compiles in its place (PyG's BatchNorm scripts): a
        ``torch.nn.BatchNorm1d`` holding this layer's parameters and buffers (shared, not
        copied), in the same mode. The fused kernel is a custom op TorchScript cannot
        compile; torch's layer computes the same normalisation, to rounding. The scripted
        layer fails on one row in training, ``allow_single_element`` or not."""
        m = self.module
        plain = torch.nn.BatchNorm1d(
            m.num_features, m.eps, m.momentum, m.affine, m.track_running_stats
        )
        plain.weight, plain.bias = m.weight, m.bias
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            setattr(plain, name, getattr(m, name))
        return plain.train(self.training)

    def _load_from_state_dict(self, state_dict, prefix, *args) -> None:
        for name in _STATE_NAMES:  # an old galfast or BatchNorm1d checkpoint: its keys renamed
            if prefix + name in state_dict:
                state_dict[f"{prefix}module.{name}"] = state_dict.pop(prefix + name)
        super()._load_from_state_dict(state_dict, prefix, *args)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.module.extra_repr()})"


class _FusedBatchNorm1d(torch.nn.BatchNorm1d):
    """``torch.nn.BatchNorm1d`` on galfast's fused kernel where that applies (see
    :class:`BatchNorm`)."""

    def forward(self, input: Tensor) -> Tensor:
        if not self._fused_applies(input):
            return super().forward(input)
        momentum = self.momentum
        track = self.training and self.track_running_stats
        if track and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if momentum is None:  # cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked)
        y, stats = fused_batch_norm(input, self.weight, self.bias, float(self.eps))
        if track and (self.running_mean is not None or self.running_var is not None):
            update_running(
                stats,
                self.running_mean,
                self.running_var,
                input.size(0),
                0.0 if momentum is None else float(momentum),
            )
        return y

    def uses_batch_stats(self) -> bool:
        """Whether a forward normalises by the batch's statistics (as torch decides)."""
        return self.training or (self.running_mean is None and self.running_var is None)

    def _fused_applies(self, input: Tensor) -> bool:
        """Batch statistics on a 2-D CPU float input whose parameters and buffers match it."""
        if not self.uses_batch_stats() or not isinstance(input, Tensor) or input.dim() != 2:
            return False
        if input.device.type != "cpu" or input.dtype not in _FUSED_DTYPES or input.size(0) < 2:
            return False
        if input.size(1) != self.num_features:
            return False
        for t in (self.weight, self.bias, self.running_mean, self.running_var):
            if t is not None and (t.dtype != input.dtype or t.device.type != "cpu"):
                return False
        return True
