"""GATConv's per-edge pieces outside the fused kernel: the edge-feature term of the logits (one
number per edge and head, which the kernel adds) and, for ``return_attention_weights``, the
attention coefficients and the edges they belong to, laid out as PyG returns them."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from galfast.graph import Graph
from galfast.nn._graph_input import LayerGraph, csr_from_coo
from galfast.ops import aggregate

__all__ = ["attention_weights", "edge_logits", "reported_edges"]

_REDUCE = {"max": "amax", "min": "amin", "mul": "prod"}


class _EdgeTermLayout(NamedTuple):
    """Where each edge term of the looped graph comes from; structure only, cached on it."""

    gather: Tensor  # [E'] row of cat([input edges' terms, loops' terms]) per looped CSR edge
    non_loop: Tensor  # [K] input positions of the input's non-loop edges whose target has a loop
    target: Tensor  # [K] their targets (edge_index[1], whatever the flow)
    count: Tensor  # [loops, 1] int64 max(number of those edges per node, 1)


def _edge_term_layout(
    original: Graph, order: Optional[Tensor], graph: Graph, source: Tensor, flow: str
) -> _EdgeTermLayout:
    """The layout for ``graph`` (``original`` with its self loops replaced, ``source`` as from
    ``self_loops_replaced``); ``order`` maps ``original``'s CSR edges to input positions."""
    num_edges = original.num_edges
    input_pos = order if order is not None else torch.arange(num_edges, device=original.device)
    loops = min(original.num_nodes, original.num_src_nodes)
    plain = graph.row != graph.col
    gather = (graph.row + num_edges).masked_scatter(plain, input_pos[source[plain]])
    # PyG's add_self_loops reduces by edge_index[1] (the CSR row, or col when flipped).
    target = original.col if flow == "target_to_source" else original.row
    kept = ((original.row != original.col) & (target < loops)).nonzero().view(-1)
    target = target.index_select(0, kept)
    count = torch.zeros(loops, dtype=torch.long, device=original.device)
    count.scatter_add_(0, target, torch.ones_like(target))
    count = count.clamp(min=1).unsqueeze(1)  # (divided in the terms' dtype: float64 stays exact)
    return _EdgeTermLayout(gather, input_pos.index_select(0, kept), target, count)


def _loop_terms(
    edge_feats: Tensor, project: Tensor, per_edge: Tensor, layout: _EdgeTermLayout, fill_value
) -> Tensor:
    """``[loops, H]`` edge terms of the added self loops, whose edge features are, as in PyG's
    ``add_self_loops``: a constant, a given vector, or a reduction of each node's incoming
    non-loop edges' features (for a node without any: 0, or 1 for ``"mul"``, PyG's empty
    product, its scatter starting from ones). The projection is linear, so
    constants, sums and means are taken of the per-edge terms (``per_edge``, input order, H
    columns) rather than of the D-wide features."""
    loops, heads = layout.count.size(0), project.size(1)
    if isinstance(fill_value, Tensor):
        if fill_value.numel() not in (1, project.size(0)):
            # A lazy layer (edge_dim=-1) learns the feature width only here.
            raise ValueError(
                f"fill_value must hold 1 or edge_dim = {project.size(0)} values, got shape "
                f"{list(fill_value.shape)}"
            )
        # One value stands for every feature, as PyG broadcasts it.
        fill = fill_value.to(edge_feats).reshape(1, -1).expand(1, project.size(0))
        return (fill @ project).expand(loops, heads)
    if not isinstance(fill_value, str):
        return (float(fill_value) * project.sum(0, keepdim=True)).expand(loops, heads)
    if fill_value in ("add", "sum", "mean"):
        summed = per_edge.new_zeros(loops, heads).index_add(
            0, layout.target, per_edge.index_select(0, layout.non_loop)
        )
        if fill_value == "mean":
            return summed / layout.count.to(summed.dtype)
        return summed
    values = edge_feats.index_select(0, layout.non_loop)
    index = layout.target.unsqueeze(1).expand_as(values)
    base = edge_feats.new_full((loops, values.size(1)), 1.0 if fill_value == "mul" else 0.0)
    reduced = base.scatter_reduce(0, index, values, _REDUCE[fill_value], include_self=False)
    return reduced @ project


def edge_logits(
    conv: Any,
    edge_feats: Tensor,
    layer: LayerGraph,
    graph: Graph,
    source: Optional[Tensor],
    *,
    fill_value: Any,
) -> Tensor:
    """``[num_edges of graph, H]``: :math:`a_{edge,k}^\\top \\Theta_{e,k} e_{ji}` per edge of
    ``graph`` (``layer.graph`` with the self loops of ``source``, see ``self_loops_replaced``,
    when ``source`` is given). The two maps fold into one ``[D, H]`` matrix, so no ``[E, H, C]``
    tensor is built; the terms are computed in input order and put in ``graph``'s CSR order by
    one gather whose index (and the loops' reduction index) is cached on ``graph``."""
    heads, channels = conv.heads, conv.out_channels
    weight = conv.lin_edge.weight.view(heads, channels, -1)
    project = (weight * conv.att_edge.view(heads, channels, 1)).sum(1).t()  # [D, H]
    # Input order; in the parameters' dtype under autocast too (a half-precision product),
    # as PyG's logits, taken with its float32 attention vector.
    per_edge = (edge_feats @ project).to(project.dtype)
    if source is None:
        return per_edge if layer.order is None else per_edge.index_select(0, layer.order)
    layout = graph.cached(
        ("nn", "gat_edge_term", conv.flow),
        lambda: _edge_term_layout(layer.graph, layer.order, graph, source, conv.flow),
    )
    if isinstance(fill_value, str) and fill_value in _SUMMED:
        # Each edge term of the looped graph is a fixed weighted sum of input terms (its own
        # edge's, or the mean / sum of a node's in-edges' for its loop): one fused aggregation
        # over a cached [E', E] mixing graph, forward and backward.
        mean = _SUMMED[fill_value] == "mean"
        mixer = graph.cached(
            ("nn", "gat_edge_mixer", conv.flow, _SUMMED[fill_value], per_edge.dtype),
            lambda: _mixing_graph(layout, per_edge.size(0), mean, per_edge.dtype),
        )
        return aggregate(mixer, per_edge)
    loop_terms = _loop_terms(edge_feats, project, per_edge, layout, fill_value)
    return torch.cat([per_edge, loop_terms]).index_select(0, layout.gather)


_SUMMED = {"add": "sum", "sum": "sum", "mean": "mean"}


def _mixing_graph(
    layout: _EdgeTermLayout, num_inputs: int, mean: bool, dtype: torch.dtype
) -> Graph:
    """The bipartite Graph (rows: the looped graph's edges in CSR order; sources: the input
    edges) whose weighted sum gives each edge term: weight 1 from its own input edge for an
    ordinary edge, 1 (``"add"``) or 1 / count (``"mean"``) from each of node i's non-loop
    in-edges for node i's loop; the weights in the terms' ``dtype``."""
    gather = layout.gather
    plain = (gather < num_inputs).nonzero().view(-1)
    loop_rows = (gather >= num_inputs).nonzero().view(-1)
    loop_of_node = torch.full_like(layout.count.view(-1), -1)
    loop_of_node[gather[loop_rows] - num_inputs] = loop_rows
    rows = torch.cat([plain, loop_of_node[layout.target]])
    cols = torch.cat([gather[plain], layout.non_loop])
    weight = torch.ones(rows.numel(), dtype=dtype, device=rows.device)
    if mean:
        weight[plain.numel() :] = layout.count.view(-1)[layout.target].to(dtype).reciprocal()
    mixer, order = csr_from_coo(rows, cols, gather.numel(), num_inputs)
    return Graph(mixer.rowptr, mixer.col, mixer.num_nodes, weight[order], num_src_nodes=num_inputs)


def _positions(graph: Graph, source: Tensor, input_pos: Tensor, loops_at: int) -> Tensor:
    """For each edge of ``graph`` (a graph with loops added, ``source`` as from
    ``self_loops_replaced``): ``input_pos`` of the edge it comes from, or ``loops_at + i`` for
    node i's loop."""
    plain = graph.row != graph.col
    index = graph.row + loops_at
    return index.masked_scatter(plain, input_pos[source[plain]])


def attention_weights(
    graph: Graph,
    alpha_src: Tensor,
    alpha_dst: Tensor,
    alpha_edge: Optional[Tensor],
    negative_slope: float,
) -> Tensor:
    """``[num_edges, H]`` attention coefficients per edge of ``graph`` in CSR order: the softmax
    over each destination's incoming edges that the fused kernel computes, here in plain torch
    (differentiable) for ``return_attention_weights``."""
    row, col = graph.row, graph.col
    logits = alpha_src[col] + alpha_dst[row]
    if alpha_edge is not None:
        logits = logits + alpha_edge
    logits = F.leaky_relu(logits, negative_slope)
    shape = (graph.num_nodes, logits.size(1))
    index = row.unsqueeze(1).expand_as(logits)
    peak = logits.new_full(shape, float("-inf")).scatter_reduce(
        0, index, logits.detach(), "amax", include_self=True
    )
    weights = (logits - peak[row]).exp()
    total = logits.new_zeros(shape).index_add(0, row, weights)
    return weights / total[row]


def reported_edges(
    edge_index: Any, layer: LayerGraph, graph: Graph, source: Optional[Tensor], alpha: Tensor
) -> Any:
    """What PyG's GATConv returns with the output for ``return_attention_weights``: for an
    edge_index ``(edge_index', alpha')`` in PyG's order (the input's non-loop edges in input
    order, then one loop per node, when loops are added; else the input edges); for a
    torch.sparse ``adj_t`` ``(adj', alpha)`` with ``adj'`` holding ``alpha`` as values; for a
    torch_sparse SparseTensor the SparseTensor with values ``alpha``; for a Graph
    ``(graph.edge_index(), alpha)`` in CSR order."""
    if isinstance(edge_index, Graph):
        return graph.edge_index(), alpha
    if isinstance(edge_index, Tensor) and edge_index.layout == torch.sparse_csr:
        size = (graph.num_nodes, graph.num_src_nodes, alpha.size(1))
        adj = torch.sparse_csr_tensor(  # valid by construction: no invariant scan
            graph.rowptr, graph.col, alpha, size, check_invariants=False
        )
        return adj, alpha
    if (
        isinstance(edge_index, Tensor)
        and edge_index.is_sparse
        or (isinstance(edge_index, Tensor) and edge_index.layout == torch.sparse_csc)
    ):
        size = (graph.num_nodes, graph.num_src_nodes, alpha.size(1))
        indices = torch.stack([graph.row, graph.col])
        adj = torch.sparse_coo_tensor(
            indices, alpha, size, is_coalesced=True, check_invariants=False
        )
        return adj, alpha
    if not isinstance(edge_index, Tensor):  # a torch_sparse SparseTensor
        adj = edge_index.set_diag() if source is not None else edge_index
        return adj.set_value(alpha, layout="coo")
    order = layer.order
    if source is None:
        return edge_index, alpha.new_empty(alpha.shape).index_copy(0, order, alpha)
    non_loop = edge_index[0] != edge_index[1]
    rank = torch.cumsum(non_loop, 0) - 1
    kept = int(non_loop.sum())
    loops = graph.num_edges - kept
    nodes = torch.arange(loops, dtype=edge_index.dtype, device=edge_index.device)
    reported = torch.cat([edge_index[:, non_loop], torch.stack([nodes, nodes])], 1)
    position = _positions(graph, source, rank[order], kept)
    return reported, alpha.new_empty(alpha.shape).index_copy(0, position, alpha)
