"""SAGEConv: GraphSAGE's neighbourhood aggregation on galfast's fused kernels."""

from __future__ import annotations

from typing import Any, Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from galfast.graph import Graph
from galfast.nn._block_input import block_features
from galfast.nn._graph_input import layer_graph, unweighted
from galfast.nn._layer_checks import (
    Channels,
    channel_pair,
    check_channels,
    check_features,
    node_counts,
    split_features,
)
from galfast.nn._pyg_compat import FusedLayer, make_linear
from galfast.ops import Block, aggregate

__all__ = ["SAGEConv"]

_AGGRS = {"mean": "mean", "sum": "sum", "add": "sum", "max": "max", "min": "min"}


class SAGEConv(FusedLayer):
    r"""GraphSAGE from Hamilton et al., "Inductive Representation Learning on Large Graphs"
    (NeurIPS 2017), equal to PyG's ``SAGEConv`` for the same weights.

    .. math::
        x'_i = W_1 x_i + W_2 \cdot \mathop{\mathrm{aggr}}_{j \in \mathcal N(i)} x_j

    with ``aggr`` in mean, sum (alias add), max or min over the incoming edges (parallel
    edges counted; a node without neighbours aggregates 0). With ``project``, sources are
    first mapped by :math:`x_j \leftarrow \mathrm{ReLU}(W_3 x_j + b)`; with ``normalize`` the
    output is L2-normalised. As in PyG, an ``edge_index`` carries no weights, while a sparse
    ``adj_t``'s values weight the aggregated features (PyG's ``spmm``); a Graph's stored
    weights are ignored.

    Args:
        in_channels: input features per node, -1 to infer them on the first call, or a pair
            ``(source, destination)`` for bipartite inputs ``x = (x_src, x_dst)``.
        out_channels: output features per node.
        aggr: ``"mean"`` (default), ``"sum"``/``"add"``, ``"max"`` or ``"min"``. PyG's other
            aggregations (``"lstm"``, lists, ``Aggregation`` modules) are refused.
        normalize: L2-normalise the output. Default False.
        root_weight: add the transformed root features :math:`W_1 x_i`. Default True.
        project: project the neighbour features first. Default False.
        bias: learn a bias in :math:`W_2`. Default True.
        **kwargs: PyG's ``MessagePassing`` options (``flow`` is honoured).

    Shapes:
        x ``[N, in_channels]`` or ``(x_src [N_src, C_src], x_dst [N_dst, C_dst] or None)``;
        ``edge_index`` a ``[2, E]`` edge_index, a sparse ``adj_t`` ``[N_dst, N_src]`` or a
        :class:`~galfast.Graph`; ``size`` ``(N_src, N_dst)`` (optional) -> ``[N_dst,
        out_channels]``. On a sampled :class:`~galfast.ops.Block`: x ``[num_src,
        in_channels]`` (the features of ``block.src_nodes``) -> ``[num_dst, out_channels]``,
        aggregating over the sampled neighbours (as PyG and DGL on sampled subgraphs).

    Example:
        >>> conv = SAGEConv(16, 32, aggr="max")
        >>> conv(torch.randn(3, 16), torch.tensor([[0, 1], [1, 2]])).shape
        torch.Size([3, 32])
    """

    def __init__(
        self,
        in_channels: Channels,
        out_channels: int,
        aggr: str = "mean",
        normalize: bool = False,
        root_weight: bool = True,
        project: bool = False,
        bias: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_channels(in_channels, out_channels, lazy=True, pair=True)
        if not isinstance(aggr, str) or aggr not in _AGGRS:
            raise ValueError(
                f"galfast's SAGEConv supports aggr in {sorted(_AGGRS)} (fused kernels), got "
                f"{aggr!r}; use torch_geometric.nn.SAGEConv for learnable or multiple "
                "aggregations (see docs/pyg_compat.md)"
            )
        src_channels, dst_channels = channel_pair(in_channels)
        if project and src_channels < 0:
            raise ValueError(
                "'SAGEConv' does not support lazy initialization with `project=True`: give "
                "in_channels"
            )
        self.in_channels, self.out_channels, self.aggr = in_channels, out_channels, aggr
        self.normalize, self.root_weight, self.project = normalize, root_weight, project
        if project:
            self.lin = torch.nn.Linear(src_channels, src_channels, bias=True)
        self.lin_l = make_linear(src_channels, out_channels, bias=bias)
        if root_weight:
            self.lin_r = make_linear(dst_channels, out_channels, bias=False)

    def reset_parameters(self) -> None:
        for lin in self.children():
            lin.reset_parameters()

    def forward(
        self,
        x: Union[Tensor, tuple[Tensor, Optional[Tensor]]],
        edge_index: Union[Tensor, Graph, Any],
        size: Optional[tuple[int, int]] = None,
    ) -> Tensor:
        if isinstance(edge_index, Block):
            x, edge_index = block_features(x, edge_index), edge_index.as_bipartite_graph()
        x_src, x_dst = split_features(x, bipartite=True)
        pairs = [(self.lin_l, x_src)] + ([(self.lin_r, x_dst)] if self.root_weight else [])
        self._materialize(*((m, t) for m, t in pairs if t is not None))
        src_channels, dst_channels = channel_pair(self.in_channels)
        check_features(x_src, src_channels, self.lin_l.weight, "x_src")
        if x_dst is not None and x_dst is not x_src:
            check_features(x_dst, dst_channels, self.lin_l.weight, "x_dst")
        num_src, num_dst = node_counts(x_src, x_dst, size, isinstance(x, (tuple, list)))
        two_sets = isinstance(x, (tuple, list))
        graph, weight, _, sparse = layer_graph(
            edge_index, num_dst, num_src if two_sets else None, flow=self.flow
        )
        if not sparse:
            graph, weight = unweighted(graph), None
        reduce = _AGGRS[self.aggr]
        source = F.relu(self.lin(x_src)) if self.project else x_src
        # lin_l is affine, so for sum and mean it commutes with the aggregation (an empty
        # neighbourhood gives lin_l(0) = bias either way): aggregate the narrower side.
        if reduce in ("sum", "mean") and self.out_channels < self.lin_l.in_features:
            out = aggregate(graph, F.linear(source, self.lin_l.weight), weight, reduce=reduce)
            if self.lin_l.bias is not None:
                out = out + self.lin_l.bias
        elif reduce == "min":
            out = self.lin_l(-aggregate(graph, -source, weight, reduce="max"))
        else:
            out = self.lin_l(aggregate(graph, source, weight, reduce=reduce))
        if self.root_weight and x_dst is not None:
            out = out + self.lin_r(x_dst)
        if self.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return out

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, aggr={self.aggr}"
