"""Set2Set: attention-based readout of a set of node features per graph."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from galfast._args import check_int
from galfast.nn._pyg_compat import Unscriptable

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


class Set2Set(Unscriptable):
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
        x ``[N, in_channels]``; ``index`` ``[N]`` graph id of each node (int64; None: one
        graph), or ``ptr`` ``[num_graphs + 1]`` offsets of the graphs' node ranges in a sorted
        batch (PyG's; here enough alone); ``dim_size`` the number of graphs (default: the
        largest id + 1, or ``ptr``'s) -> ``[num_graphs, 2 * in_channels]``; a graph with no
        nodes gets :math:`r_t = 0`. ``dim`` must be -2 (or 0), the node dimension.

    ``torch.export`` traces it (with ``dim_size``); ``torch.compile(fullgraph=True)`` refuses it,
    as PyG's: torch does not trace a ``torch.nn.LSTM`` (without fullgraph the graph breaks there).

    Example:
        >>> readout = Set2Set(4, processing_steps=3)
        >>> readout(torch.randn(5, 4), torch.tensor([0, 0, 1, 1, 1])).shape
        torch.Size([2, 8])
    """

    def __init__(self, in_channels: int, processing_steps: int, **kwargs) -> None:
        super().__init__()
        in_channels = check_int("in_channels", in_channels, 1)
        processing_steps = check_int("processing_steps", processing_steps, 0)
        self.in_channels, self.out_channels = in_channels, 2 * in_channels
        self.processing_steps = processing_steps
        self.lstm = torch.nn.LSTM(self.out_channels, in_channels, **kwargs)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lstm.reset_parameters()

    def forward(
        self,
        x: Tensor,
        index: Optional[Tensor] = None,
        ptr: Optional[Tensor] = None,
        dim_size: Optional[int] = None,
        dim: int = -2,
    ) -> Tensor:
        if not isinstance(x, Tensor) or x.dim() != 2 or x.size(1) != self.in_channels:
            shape = list(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(f"x must be a [num_nodes, {self.in_channels}] tensor, got {shape}")
        if dim_size is not None:
            dim_size = check_int("dim_size", dim_size, 0)
        if dim not in (-2, 0):
            raise ValueError(f"Set2Set reduces x [num_nodes, features] over dim -2, got dim={dim}")
        if ptr is not None:
            if not isinstance(ptr, Tensor) or ptr.dim() != 1 or not ptr.numel():
                raise ValueError("ptr must be a [num_graphs + 1] tensor of node offsets")
            if dim_size is None:
                dim_size = ptr.numel() - 1
            elif dim_size != ptr.numel() - 1:
                raise ValueError(f"dim_size is {dim_size} but ptr holds {ptr.numel() - 1} graphs")
            if index is None:  # PyG asks for index too; ptr's node ranges give it
                counts = ptr.diff()
                if int(ptr[0]) != 0 or int(ptr[-1]) != x.size(0) or bool((counts < 0).any()):
                    raise ValueError(f"ptr must rise from 0 to the {x.size(0)} nodes of x")
                graphs = torch.arange(dim_size, device=ptr.device)
                index = torch.repeat_interleave(graphs, counts)
        if index is None:  # PyG: all nodes form one graph
            index = torch.zeros(x.size(0), dtype=torch.long, device=x.device)
        if not isinstance(index, Tensor) or index.shape != (x.size(0),):
            raise ValueError(f"index must be a [{x.size(0)}] tensor of graph ids (one per node)")
        if index.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"index must hold int64 graph ids, got {index.dtype}")
        index = index.long()
        # torch.compile / torch.export cannot trace checks that read values: with dim_size
        # given they are skipped there (index_add and the gathers check the ids themselves).
        checked = not (torch.compiler.is_compiling() and dim_size is not None)
        if checked and index.numel() and int(index.min()) < 0:
            raise ValueError("index holds a negative graph id")
        if dim_size is None:
            dim_size = int(index.max()) + 1 if index.numel() else 0
        elif checked and index.numel() and int(index.max()) >= dim_size:
            raise ValueError(f"index holds graph id {int(index.max())} >= dim_size {dim_size}")
        layers = self.lstm.num_layers
        state = (
            x.new_zeros(layers, dim_size, self.in_channels),
            x.new_zeros(layers, dim_size, self.in_channels),
        )
        q_star = x.new_zeros(dim_size, self.out_channels)
        for _ in range(self.processing_steps):
            q, state = self.lstm(q_star.unsqueeze(0), state)
            q = q.view(dim_size, self.in_channels)
            scores = (x * q[index]).sum(dim=-1, keepdim=True)
            attention = _segment_softmax(scores, index, dim_size)
            readout = x.new_zeros(dim_size, self.in_channels).index_add(0, index, attention * x)
            q_star = torch.cat([q, readout], dim=-1)
        return q_star

    def __repr__(self) -> str:  # PyG's: the input and output widths
        return f"{type(self).__name__}({self.in_channels}, {2 * self.in_channels})"
