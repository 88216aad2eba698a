"""Set2Set: attention-based readout of a set of node features per graph."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

__all__ = ["Set2Set"]


def _segment_softmax(scores: Tensor, index: Tensor, num_segments: int) -> Tensor:
    """Softmax of ``scores`` ``[N, 1]`` within each segment of ``index`` (PyG's softmax: the
    maximum is taken without gradient, and 1e-16 keeps an all-underflow segment finite)."""
    expanded = index.unsqueeze(1)
    top = scores.new_zeros(num_segments, 1).scatter_reduce(
        0, expanded, scores.detach(), "amax", include_self=False
    )
    exp = (scores - top[index]).exp()
    total = scores.new_zeros(num_segments, 1).index_add(0, index, exp) + 1e-16
    return exp / total[index]


class Set2Set(torch.nn.Module):
    r"""The Set2Set readout of Vinyals et al., "Order Matters: Sequence to sequence for Sets"
    (ICLR 2016), equal to PyG's ``Set2Set`` for the same weights (same state dict).

    .. math::
        q_t = \mathrm{LSTM}(q^*_{t-1}), \quad
        \alpha_{i,t} = \mathrm{softmax}_{i \in G}(x_i \cdot q_t), \quad
        r_t = \sum_{i \in G} \alpha_{i,t} x_i, \quad q^*_t = q_t \Vert r_t

    for every graph :math:`G`, starting from :math:`q^*_0 = 0`; returns :math:`q^*_T`.

    Args:
        in_channels: features per node.
        processing_steps: number of steps :math:`T`.
        **kwargs: further arguments of :class:`torch.nn.LSTM` (e.g. ``num_layers``).

    Shapes:
        x ``[N, in_channels]``, ``batch`` ``[N]`` graph id of each node (int64) ->
        ``[num_graphs, 2 * in_channels]``; a graph with no nodes gets :math:`r_t = 0`.

    Example:
        >>> readout = Set2Set(4, processing_steps=3)
        >>> readout(torch.randn(5, 4), torch.tensor([0, 0, 1, 1, 1])).shape
        torch.Size([2, 8])
    """

    def __init__(self, in_channels: int, processing_steps: int, **kwargs) -> None:
        super().__init__()
        for name, value, low in (
            ("in_channels", in_channels, 1),
            ("processing_steps", processing_steps, 0),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        self.in_channels, self.out_channels = in_channels, 2 * in_channels
        self.processing_steps = processing_steps
        self.lstm = torch.nn.LSTM(self.out_channels, in_channels, **kwargs)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lstm.reset_parameters()

    def forward(self, x: Tensor, batch: Tensor, num_graphs: Optional[int] = None) -> Tensor:
        if not isinstance(x, Tensor) or x.dim() != 2 or x.size(1) != self.in_channels:
            shape = list(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"x must be a [num_nodes, {self.in_channels}] tensor, got {shape}")
        if not isinstance(batch, Tensor) or batch.shape != (x.size(0),):
            raise ValueError(f"batch must be a [{x.size(0)}] tensor of graph ids (one per node)")
        if batch.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"batch must hold int64 graph ids, got {batch.dtype}")
        batch = batch.long()
        if batch.numel() and int(batch.min()) < 0:
            raise ValueError("batch holds a negative graph id")
        if num_graphs is None:
            num_graphs = int(batch.max()) + 1 if batch.numel() else 0
        elif batch.numel() and int(batch.max()) >= num_graphs:
            raise ValueError(f"batch holds graph id {int(batch.max())} >= num_graphs {num_graphs}")
        layers = self.lstm.num_layers
        state = (
            x.new_zeros(layers, num_graphs, self.in_channels),
            x.new_zeros(layers, num_graphs, self.in_channels),
        )
        q_star = x.new_zeros(num_graphs, self.out_channels)
        for _ in range(self.processing_steps):
            q, state = self.lstm(q_star.unsqueeze(0), state)
            q = q.view(num_graphs, self.in_channels)
            scores = (x * q[batch]).sum(dim=-1, keepdim=True)
            attention = _segment_softmax(scores, batch, num_graphs)
            readout = x.new_zeros(num_graphs, self.in_channels).index_add(0, batch, attention * x)
            q_star = torch.cat([q, readout], dim=-1)
        return q_star

    def extra_repr(self) -> str:
        return f"{self.in_channels}, processing_steps={self.processing_steps}"
