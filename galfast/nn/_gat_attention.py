"""GATConv's per-edge pieces outside the fused kernel: the edge-feature term of the logits (one
number per edge and head, which the kernel adds) and, for ``return_attention_weights``, the
attention coefficients and the edges they belong to, laid out as PyG returns them."""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from galfast.graph import Graph
from galfast.nn._graph_input import LayerGraph

__all__ = ["attention_weights", "edge_logits", "reported_edges"]

_REDUCE = {"max": "amax", "min": "amin", "mul": "prod"}


def _loop_logits(
    edge_feats: Tensor,
    project: Tensor,
    per_edge: Tensor,
    graph: Graph,
    input_pos: Tensor,
    fill_value: Any,
    flow: str,
    loops: int,
) -> Tensor:
    """``[loops, H]`` edge terms of the added self loops, whose edge features are, as in PyG's
    ``add_self_loops``: a constant, a given vector, or a reduction of each node's incoming
    non-loop edges' features (by ``edge_index[1]``, whatever the flow; 0 for a node without
    any). The projection is linear, so constants, sums and means are taken of the per-edge
    terms (``per_edge`` in CSR order, H columns) rather than of the D-wide features."""
    heads = project.size(1)
    if isinstance(fill_value, Tensor):
        return (fill_value.to(edge_feats).reshape(1, -1) @ project).expand(loops, heads)
    if not isinstance(fill_value, str):
        return (float(fill_value) * project.sum(0, keepdim=True)).expand(loops, heads)
    non_loop = (graph.row != graph.col).nonzero().view(-1)
    target = (graph.col if flow == "target_to_source" else graph.row).index_select(0, non_loop)
    nodes = max(graph.num_nodes, graph.num_src_nodes)
    if fill_value in ("add", "sum", "mean"):
        summed = per_edge.new_zeros(nodes, heads).index_add(
            0, target, per_edge.index_select(0, non_loop)
        )
        if fill_value == "mean":
            count = torch.bincount(target, minlength=nodes).clamp(min=1)
            summed = summed / count.unsqueeze(1).to(summed.dtype)
        return summed[:loops]
    values = edge_feats.index_select(0, input_pos.index_select(0, non_loop))
    index = target.unsqueeze(1).expand_as(values)
    base = edge_feats.new_zeros(nodes, values.size(1))
    reduced = base.scatter_reduce(0, index, values, _REDUCE[fill_value], include_self=False)
    return reduced[:loops] @ project


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
    tensor is built."""
    heads, channels = conv.heads, conv.out_channels
    weight = conv.lin_edge.weight.view(heads, channels, -1)
    project = (weight * conv.att_edge.view(heads, channels, 1)).sum(1).t()  # [D, H]
    original = layer.graph
    per_edge = edge_feats @ project  # input order
    if layer.order is not None:
        per_edge = per_edge.index_select(0, layer.order)  # CSR order of `original`
    if source is None:
        return per_edge
    input_pos = (
        layer.order
        if layer.order is not None
        else torch.arange(original.num_edges, device=edge_feats.device)
    )
    loops = min(original.num_nodes, original.num_src_nodes)
    loop_logits = _loop_logits(
        edge_feats, project, per_edge, original, input_pos, fill_value, conv.flow, loops
    )
    logits = torch.cat([per_edge, loop_logits])
    csr_pos = torch.arange(original.num_edges, device=edge_feats.device)
    return logits.index_select(0, _positions(graph, source, csr_pos, original.num_edges))


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
