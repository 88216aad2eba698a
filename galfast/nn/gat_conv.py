"""GATConv: graph attention on galfast's fused attention kernel."""

from __future__ import annotations

import math
from typing import Any, Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter

from galfast._args import check_flag, check_int, check_real
from galfast.graph import Graph
from galfast.nn._block_input import block_features
from galfast.nn._gat_attention import attention_weights, edge_logits, reported_edges
from galfast.nn._graph_input import is_adjacency, layer_graph, unweighted
from galfast.nn._layer_checks import (
    Channels,
    channel_pair,
    check_channels,
    check_features,
    node_counts,
    split_features,
)
from galfast.nn._pyg_compat import FusedLayer, make_linear
from galfast.nn.norm import self_loops_replaced
from galfast.ops import Block, gat_aggregate

__all__ = ["GATConv"]

_FILL_REDUCTIONS = ("mean", "add", "sum", "max", "min", "mul")


def _glorot(t: Tensor) -> None:
    """PyG's ``glorot``: uniform in ``±sqrt(6 / (size(-2) + size(-1)))``."""
    bound = math.sqrt(6.0 / (t.size(-2) + t.size(-1)))
    torch.nn.init.uniform_(t, -bound, bound)


def _check_fill_value(fill_value: Any, edge_dim: Optional[int]) -> Union[float, Tensor, str]:
    """PyG's fill values: a number (None: 1, as PyG), a tensor of one value or one per edge
    feature, or the name of a reduction of each node's incoming edge features."""
    if isinstance(fill_value, str):
        if fill_value not in _FILL_REDUCTIONS:
            raise ValueError(
                f"fill_value must be a number, a tensor or one of {_FILL_REDUCTIONS}, got "
                f"{fill_value!r}"
            )
        return str(fill_value)
    if isinstance(fill_value, Tensor) and fill_value.dim() > 0:
        if edge_dim is not None and edge_dim > 0 and fill_value.numel() not in (1, edge_dim):
            raise ValueError(
                f"fill_value must hold 1 or edge_dim = {edge_dim} values, got shape "
                f"{list(fill_value.shape)}"
            )
        return fill_value
    return check_real("fill_value", 1.0 if fill_value is None else fill_value)


class GATConv(FusedLayer):
    r"""The graph attention operator of Veličković et al., "Graph Attention Networks"
    (ICLR 2018), equal to PyG's ``GATConv`` for the same weights (same attention dropout
    probability, though not the same random mask).

    .. math::
        x'_i = \big\Vert_{k=1}^{H} \sum_{j \in \mathcal N(i) \cup \{i\}}
               \alpha_{ij}^k \Theta_k x_j + b, \qquad
        \alpha_{ij}^k = \mathrm{softmax}_j\Big(\mathrm{LeakyReLU}\big(a_{src,k}^\top
               \Theta_k x_j + a_{dst,k}^\top \Theta_k x_i
               + a_{edge,k}^\top \Theta_{e,k} e_{ji}\big)\Big)

    (heads averaged instead of concatenated when ``concat=False``; the edge term only with
    ``edge_dim``). The logits, softmax and weighted sum run in one fused kernel
    (:func:`galfast.ops.gat_aggregate`) that never materialises per-edge features: the edge
    term enters it as one number per edge and head, so memory stays O(N H F + E H).

    Args:
        in_channels: input features per node, -1 to infer them on the first call, or a pair
            ``(source, destination)`` for bipartite inputs ``x = (x_src, x_dst)`` (then the
            two sides get their own maps ``lin_src`` / ``lin_dst``, as in PyG).
        out_channels: features per head.
        heads: number of attention heads. Default 1.
        concat: concatenate the heads (else average them). Default True.
        negative_slope: LeakyReLU slope. Default 0.2.
        dropout: dropout probability of the attention coefficients in training. Default 0.
        add_self_loops: replace every node's self loops by exactly one. Default True.
        edge_dim: edge feature size (None: no edge features).
        fill_value: edge features of the added self loops: a float (None: 1.0, as PyG), a
            tensor of one value or ``edge_dim`` values, or how to reduce each node's incoming
            edge features (``"mean"`` (default), ``"add"``, ``"max"``, ``"min"``, ``"mul"``).
        bias: learn an additive bias. Default True.
        residual: add a linear projection of the input (PyG's ``residual``). Default False.
        **kwargs: PyG's ``MessagePassing`` options (``flow`` is honoured).

    Shapes:
        x ``[N, in_channels]`` or ``(x_src [N_src, C_src], x_dst [N_dst, C_dst] or None)``;
        ``edge_index`` a ``[2, E]`` edge_index, a sparse ``adj_t`` ``[N_dst, N_src]`` or a
        :class:`~galfast.Graph`; ``edge_attr`` ``[E, edge_dim]`` (or ``[E]`` for
        ``edge_dim=1``) in the order of the edges; ``size`` ``(N_src, N_dst)`` ->
        ``[N_dst, heads * out_channels]`` (or ``[N_dst, out_channels]`` when
        ``concat=False``). With ``return_attention_weights=True`` also, as PyG, the edges
        attended over (self loops included) and ``alpha [E', heads]``: ``(edge_index,
        alpha)`` for an edge_index (PyG's order: the input's non-loop edges, then the
        loops), a sparse tensor of values ``alpha`` for a sparse ``adj_t``, and for a Graph
        its edges in CSR order. On a sampled :class:`~galfast.ops.Block`: x ``[num_src,
        in_channels]`` (the features of ``block.src_nodes``) -> ``[num_dst, ...]``, attending
        over each destination's sampled neighbours and itself; ``edge_attr`` in the block's
        edge order.

    Example:
        >>> conv = GATConv(16, 8, heads=4)
        >>> conv(torch.randn(3, 16), torch.tensor([[0, 1], [1, 2]])).shape
        torch.Size([3, 32])
    """

    _default_node_dim = 0

    def __init__(
        self,
        in_channels: Channels,
        out_channels: int,
        heads: int = 1,
        concat: bool = True,
        negative_slope: float = 0.2,
        dropout: float = 0.0,
        add_self_loops: bool = True,
        edge_dim: Optional[int] = None,
        fill_value: Union[float, Tensor, str] = "mean",
        bias: bool = True,
        residual: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        # out_channels = 0 would leave the attention vectors without fan-in to initialise.
        in_channels, out_channels = check_channels(
            in_channels, out_channels, minimum_out=1, lazy=True, pair=True
        )
        heads = check_int("heads", heads, 1)
        concat, bias = check_flag("concat", concat), check_flag("bias", bias)
        add_self_loops = check_flag("add_self_loops", add_self_loops)
        residual = check_flag("residual", residual)
        negative_slope = check_real("negative_slope", negative_slope)
        dropout = check_real("dropout", dropout, 0.0, 1.0)
        if edge_dim is not None:
            edge_dim = check_int("edge_dim", edge_dim, -1)
            if edge_dim == 0:
                raise ValueError("edge_dim must be None, -1 (lazy) or >= 1, got 0")
        fill_value = _check_fill_value(fill_value, edge_dim)
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.concat, self.negative_slope, self.dropout = concat, negative_slope, dropout
        self.add_self_loops, self.residual = add_self_loops, residual
        self.edge_dim, self.fill_value = edge_dim, fill_value
        total = heads * out_channels if concat else out_channels
        src_channels, dst_channels = channel_pair(in_channels)
        self.lin = self.lin_src = self.lin_dst = None
        if isinstance(in_channels, int):
            self.lin = make_linear(
                in_channels, heads * out_channels, bias=False, weight_initializer="glorot"
            )
        else:
            self.lin_src = make_linear(
                src_channels, heads * out_channels, bias=False, weight_initializer="glorot"
            )
            self.lin_dst = make_linear(
                dst_channels, heads * out_channels, bias=False, weight_initializer="glorot"
            )
        self.att_src = Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = Parameter(torch.empty(1, heads, out_channels))
        if edge_dim is not None:
            self.lin_edge = make_linear(
                edge_dim, heads * out_channels, bias=False, weight_initializer="glorot"
            )
            self.att_edge = Parameter(torch.empty(1, heads, out_channels))
        else:
            self.lin_edge = None
            self.register_parameter("att_edge", None)
        self.res = (
            make_linear(dst_channels, total, bias=False, weight_initializer="glorot")
            if residual
            else None
        )
        self.bias = Parameter(torch.empty(total)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.lin, self.lin_src, self.lin_dst, self.lin_edge, self.res):
            if lin is not None and not isinstance(
                lin.weight, torch.nn.parameter.UninitializedParameter
            ):
                torch.nn.init.xavier_uniform_(lin.weight)
        for att in (self.att_src, self.att_dst, self.att_edge):
            if att is not None:
                _glorot(att)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(
        self,
        x: Union[Tensor, tuple[Tensor, Optional[Tensor]]],
        edge_index: Union[Tensor, Graph, Any],
        edge_attr: Optional[Tensor] = None,
        size: Optional[tuple[int, int]] = None,
        return_attention_weights: Optional[bool] = None,
    ) -> Union[Tensor, tuple[Tensor, Any]]:
        H, C = self.heads, self.out_channels
        if isinstance(edge_index, Block):
            # Destination i is local node i: the added loops are the block's own nodes'.
            x, edge_index = block_features(x, edge_index), edge_index.as_bipartite_graph()
        two_sets = isinstance(x, (tuple, list))
        x_src, x_dst = split_features(x, bipartite=True)
        edge_feats = None
        if edge_attr is not None and self.lin_edge is not None:
            edge_feats = edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr
        # PyG's order of first calls: the residual map, then the node maps (the edge map below).
        self._materialize(
            *(
                (m, t)
                for m, t in (
                    (self.res, x_dst),
                    (self.lin, x_src),
                    (self.lin_src, x_src),
                    (self.lin_dst, x_dst),
                )
                if m is not None and t is not None
            )
        )
        src_channels, dst_channels = channel_pair(self.in_channels)
        first = self.lin if self.lin is not None else self.lin_src
        check_features(x_src, src_channels, first.weight, "x_src" if two_sets else "x")
        if two_sets and x_dst is not None:
            check_features(x_dst, dst_channels, first.weight, "x_dst")
        num_src, num_dst = node_counts(x_src, x_dst, size, two_sets)
        layer = layer_graph(edge_index, num_dst, num_src if two_sets else None, flow=self.flow)
        graph = unweighted(layer.graph)
        if edge_feats is not None:
            self._check_edge_attr(edge_feats, graph.num_edges, edge_index)

        if self.lin is not None:
            h_src = self.lin(x_src).view(-1, H, C)
            h_dst = h_src if not two_sets else None
            if two_sets and x_dst is not None:
                h_dst = self.lin(x_dst).view(-1, H, C)
        else:
            h_src = self.lin_src(x_src).view(-1, H, C)
            h_dst = None if x_dst is None else self.lin_dst(x_dst).view(-1, H, C)
        alpha_src = (h_src * self.att_src).sum(-1)
        if h_dst is None:  # PyG: no destination term without destination features
            alpha_dst = alpha_src.new_zeros(graph.num_nodes, H)
        else:
            alpha_dst = (h_dst * self.att_dst).sum(-1)

        source = None
        if self.add_self_loops:
            graph, source = self_loops_replaced(graph)
        alpha_edge = None
        # As PyG, the edge map is first called (and a lazy one sized) only when there are edges.
        if edge_feats is not None and graph.num_edges:
            self._materialize((self.lin_edge, edge_feats))
            alpha_edge = edge_logits(
                self, edge_feats, layer, graph, source, fill_value=self.fill_value
            )
        # Under autocast the projections come out in half precision, and the logits, taken with
        # the float32 attention vectors, in float32: PyG's messages (logit x feature) promote
        # to the logits' dtype, and so does the fused aggregation here.
        h_src = h_src.to(alpha_src.dtype)
        if alpha_edge is not None:
            alpha_edge = alpha_edge.to(alpha_src.dtype)
        dropout = self.dropout if self.training else 0.0
        if return_attention_weights:
            alpha = attention_weights(graph, alpha_src, alpha_dst, alpha_edge, self.negative_slope)
            if dropout > 0:  # PyG reports the dropped coefficients the output used
                alpha = F.dropout(alpha, p=dropout, training=True)
                messages = alpha.unsqueeze(-1) * h_src[graph.col]
                out = h_src.new_zeros(graph.num_nodes, H, C).index_add(0, graph.row, messages)
            else:
                out = gat_aggregate(
                    graph,
                    h_src,
                    alpha_src,
                    alpha_dst,
                    alpha_edge,
                    negative_slope=self.negative_slope,
                )
        else:
            out = gat_aggregate(
                graph,
                h_src,
                alpha_src,
                alpha_dst,
                alpha_edge,
                negative_slope=self.negative_slope,
                dropout=dropout,
            )
        out = out.flatten(1) if self.concat else out.mean(1)
        if self.res is not None and x_dst is not None:
            out = out + self.res(x_dst)
        if self.bias is not None:
            out = out + self.bias
        if return_attention_weights:
            return out, reported_edges(edge_index, layer, graph, source, alpha)
        return out

    def _check_edge_attr(self, edge_feats: Tensor, num_edges: int, edge_index: Any) -> None:
        sparse = is_adjacency(edge_index)
        if self.add_self_loops and sparse:
            raise NotImplementedError(
                "edge_attr together with add_self_loops=True is not supported for a sparse "
                "adj_t (nor is it in PyG): pass the edge_index, or add the loops yourself"
            )
        if edge_feats.size(0) != num_edges:
            # A COO adj_t stored with duplicates is read coalesced, as torch.sparse reads it.
            counted = " (a sparse adj_t's coalesced entries)" if sparse else ""
            raise ValueError(
                f"edge_attr must have one row per edge ({num_edges}{counted}), got "
                f"{list(edge_feats.shape)}"
            )

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, heads={self.heads}"
