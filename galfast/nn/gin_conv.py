"""GINConv: the graph isomorphism network layer on galfast's fused aggregation."""

from __future__ import annotations

from typing import Union

import torch
from torch import Tensor

from galfast.graph import Graph
from galfast.nn._graph_input import graph_input, unweighted
from galfast.ops import aggregate

__all__ = ["GINConv"]


def _reset(module: torch.nn.Module) -> None:
    """Resets a module, or else each of its children (a Sequential has no reset of its own)."""
    if hasattr(module, "reset_parameters"):
        module.reset_parameters()
    else:
        for child in module.children():
            _reset(child)


class GINConv(torch.nn.Module):
    r"""The graph isomorphism operator of Xu et al., "How Powerful are Graph Neural Networks?"
    (ICLR 2019), equal to PyG's ``GINConv`` for the same weights.

    .. math::
        x'_i = h_\Theta\Big((1 + \epsilon)\, x_i + \sum_{j \in \mathcal N(i)} x_j\Big)

    summing over the incoming edges (parallel edges counted, edge weights ignored as in PyG).

    Args:
        nn: the network :math:`h_\Theta` applied to the aggregated features, e.g. an MLP.
        eps: initial :math:`\epsilon`. Default 0.
        train_eps: learn :math:`\epsilon` (a parameter) instead of fixing it (a buffer).

    Shapes:
        x ``[N, F_in]``; ``edge_index_or_graph`` a ``[2, E]`` edge_index or a
        :class:`~galfast.Graph` -> ``[N, F_out]`` (what ``nn`` returns).

    Example:
        >>> conv = GINConv(torch.nn.Linear(16, 32), train_eps=True)
        >>> conv(torch.randn(3, 16), torch.tensor([[0, 1], [1, 2]])).shape
        torch.Size([3, 32])
    """

    def __init__(self, nn: torch.nn.Module, eps: float = 0.0, train_eps: bool = False) -> None:
        super().__init__()
        self.nn = nn
        self.initial_eps = eps
        if train_eps:
            self.eps = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("eps", torch.empty(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset(self.nn)
        self.eps.data.fill_(self.initial_eps)

    def forward(self, x: Tensor, edge_index_or_graph: Union[Tensor, Graph]) -> Tensor:
        graph, _ = graph_input(edge_index_or_graph, x.size(0))
        out = aggregate(unweighted(graph), x, reduce="sum")
        return self.nn(out + (1 + self.eps) * x)

    def extra_repr(self) -> str:
        return f"eps={self.initial_eps}"
