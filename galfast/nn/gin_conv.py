"""GINConv: the graph isomorphism network layer on galfast's fused aggregation."""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

import torch
from torch import Tensor

from galfast._args import check_flag, check_real
from galfast.graph import Graph
from galfast.nn._block_input import block_features
from galfast.nn._graph_input import layer_graph, unweighted
from galfast.nn._layer_checks import check_callable, node_counts, split_features
from galfast.nn._node_features import aggregate_nodes
from galfast.nn._pyg_compat import FusedLayer, reset_module
from galfast.ops import Block

__all__ = ["GINConv"]


class GINConv(FusedLayer):
    r"""The graph isomorphism operator of Xu et al., "How Powerful are Graph Neural Networks?"
    (ICLR 2019), equal to PyG's ``GINConv`` for the same weights.

    .. math::
        x'_i = h_\Theta\Big((1 + \epsilon)\, x_i + \sum_{j \in \mathcal N(i)} x_j\Big)

    summing over the incoming edges (parallel edges counted; as in PyG, an ``edge_index``
    carries no weights while a sparse ``adj_t``'s values weight the sum, and a Graph's stored
    weights are ignored). Bipartite inputs ``x = (x_src, x_dst)`` sum source features into
    destinations (``x_dst`` may be None: no root term).

    Args:
        nn: the network :math:`h_\Theta` applied to the aggregated features, e.g. an MLP
            (any callable, as in PyG).
        eps: initial :math:`\epsilon`, a finite number. Default 0.
        train_eps: learn :math:`\epsilon` (a parameter) instead of fixing it (a buffer).
        **kwargs: PyG's ``MessagePassing`` options (``flow`` is honoured).

    Shapes:
        x ``[N, F_in]`` (or ``[B, N, F_in]``), or ``(x_src [N_src, F_in], x_dst [N_dst, F_in]
        or None)``; ``edge_index`` a ``[2, E]`` edge_index, a sparse ``adj_t`` or a
        :class:`~galfast.Graph`; ``size`` ``(N_src, N_dst)`` (optional) -> ``[N_dst, F_out]``
        (what ``nn`` returns). On a sampled :class:`~galfast.ops.Block`: x ``[num_src, F]``
        (the features of ``block.src_nodes``) -> ``[num_dst, ...]``, over the sampled
        neighbours.

    Example:
        >>> conv = GINConv(torch.nn.Linear(16, 32), train_eps=True)
        >>> conv(torch.randn(3, 16), torch.tensor([[0, 1], [1, 2]])).shape
        torch.Size([3, 32])
    """

    def __init__(
        self, nn: Callable, eps: float = 0.0, train_eps: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.nn = check_callable("nn", nn)
        self.initial_eps = check_real("eps", eps)
        if check_flag("train_eps", train_eps):
            self.eps = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("eps", torch.empty(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_module(self.nn)
        self.eps.data.fill_(self.initial_eps)

    def forward(
        self,
        x: Union[Tensor, tuple[Tensor, Optional[Tensor]]],
        edge_index: Union[Tensor, Graph, Any],
        size: Optional[tuple[int, int]] = None,
    ) -> Tensor:
        if isinstance(edge_index, Block):
            x, edge_index = block_features(x, edge_index), edge_index.as_bipartite_graph()
        x_src, x_dst = split_features(x, bipartite=True)
        two_sets = isinstance(x, (tuple, list))
        num_src, num_dst = node_counts(x_src, x_dst, size, two_sets)
        graph, weight, _, sparse = layer_graph(
            edge_index, num_dst, num_src if two_sets else None, flow=self.flow
        )
        if not sparse:
            graph, weight = unweighted(graph), None
        out = aggregate_nodes(graph, x_src, weight, reduce="sum")
        if x_dst is not None:
            out = out + (1 + self.eps) * x_dst
        return self.nn(out)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(nn={self.nn})"
