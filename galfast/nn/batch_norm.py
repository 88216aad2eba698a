"""BatchNorm over node features on galfast's fused CPU kernel."""

from __future__ import annotations

import torch
from torch import Tensor

from galfast.ops.batch_norm import fused_batch_norm, update_running

__all__ = ["BatchNorm"]

_FUSED_DTYPES = (torch.float32, torch.float64)


class BatchNorm(torch.nn.BatchNorm1d):
    r"""``torch.nn.BatchNorm1d`` whose training-mode forward on a 2-D CPU input runs
    :func:`galfast.ops.batch_norm`: the ``[N, C]`` node features of a GNN, normalised per
    channel over the N nodes.

    Same arguments, parameters, buffers and ``state_dict`` as ``BatchNorm1d`` (it is one:
    ``isinstance(m, torch.nn.BatchNorm1d)`` holds, checkpoints load either way). In training
    mode (or in eval mode without running statistics) the running buffers update exactly as
    torch does: ``num_batches_tracked += 1``, then
    ``running = (1 - m) running + m batch`` with the unbiased batch variance, ``m`` the momentum
    or, for ``momentum=None``, ``1 / num_batches_tracked``. Everything else — eval mode with
    running statistics, CUDA, 3-D inputs, half types, fewer than 2 rows — runs
    ``BatchNorm1d.forward`` itself.

    torch's CPU kernel strides over the N rows once per channel and slows down with a second
    thread on inputs of this shape; the fused kernel reads the rows in order, accumulates the
    statistics in double and gives the same bits for any thread count (float32 results differ
    from torch's at rounding level).

    Example:
        >>> norm = BatchNorm(20)
        >>> norm(torch.randn(9746, 20)).shape
        torch.Size([9746, 20])
    """

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

    def _fused_applies(self, input: Tensor) -> bool:
        """Batch statistics on a 2-D CPU float input whose parameters and buffers match it."""
        uses_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        if not uses_batch_stats or not isinstance(input, Tensor) or input.dim() != 2:
            return False
        if input.device.type != "cpu" or input.dtype not in _FUSED_DTYPES or input.size(0) < 2:
            return False
        if input.size(1) != self.num_features:
            return False
        for t in (self.weight, self.bias, self.running_mean, self.running_var):
            if t is not None and (t.dtype != input.dtype or t.device.type != "cpu"):
                return False
        return True
