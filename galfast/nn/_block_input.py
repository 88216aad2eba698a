"""Layers on a sampled :class:`~galfast.ops.Block`: its features as a bipartite pair and its
whole-graph normalisations (GCN, Chebyshev).

A block's local node ``i < num_dst`` is destination ``i``, so a layer's input ``x`` ``[num_src,
F]`` is the bipartite pair ``(x, x[:num_dst])`` over :meth:`Block.as_bipartite_graph`; its
self loops are the edges with ``col == row``. GCN and ChebConv normalise by the degrees of the
whole graph the block was sampled from (``block.graph``; per-node statistics computed once and
cached on it), so a block holding every in-edge of its destinations gives exactly the
full-graph layer's rows. With fewer sampled edges each sampled neighbour's term is scaled by
(in-degree / sampled in-degree) of its destination: for uniform sampling the aggregation is
then an unbiased estimate of the full one.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from galfast.graph import Graph
from galfast.ops import Block

__all__ = ["block_features", "cheb_block_terms", "gcn_block_terms", "sampled_graph"]


def block_features(x, block: Block) -> tuple[Tensor, Tensor]:
    """``(x, x[:num_dst])`` for a layer's ``x`` ``[num_src, F]`` on ``block``."""
    if not isinstance(x, Tensor):
        raise ValueError(
            f"on a Block, x must be the [num_src, F] features of block.src_nodes, got "
            f"{type(x).__name__}"
        )
    if x.dim() != 2 or x.size(0) != block.num_src:
        raise ValueError(
            f"on a Block, x must have shape [num_src = {block.num_src}, F] (the features of "
            f"block.src_nodes), got {list(x.shape)}"
        )
    return x, x[: block.num_dst]


def sampled_graph(block: Block, layer: str) -> Graph:
    """The whole graph ``block`` was sampled from, which ``layer`` normalises by."""
    if block.graph is None:
        raise ValueError(
            f"{layer} on a Block normalises by the whole graph's degrees: use a block made by "
            "galfast.ops.sample_neighbors (block.graph is None)"
        )
    return block.graph


def _loop_free_stats(graph: Graph, dtype: torch.dtype) -> dict[str, Tensor]:
    """Per node of ``graph``: weighted in- and out-degree without self loops, the weight of its
    last self loop (NaN when it has none, the loop PyG's ``add_remaining_self_loops`` keeps).
    Cached."""

    def build():
        n, device = graph.num_nodes, graph.device
        row = torch.repeat_interleave(torch.arange(n, device=device), graph.in_degree)
        col = graph.col
        weight = graph.edge_weight
        weight = torch.ones(col.numel(), dtype=dtype, device=device) if weight is None else weight
        weight = weight.to(dtype)
        loop = row == col
        free = ~loop
        in_w = weight.new_zeros(n).index_add_(0, row[free], weight[free])
        out_w = weight.new_zeros(n).index_add_(0, col[free], weight[free])
        position = torch.arange(col.numel(), device=device)
        last = torch.full((n,), -1, dtype=torch.long, device=device)
        last.scatter_reduce_(0, row[loop], position[loop], "amax")
        loop_w = torch.cat([weight, weight.new_full((1,), float("nan"))])[last]
        return {"in": in_w, "out": out_w, "loop": loop_w}

    return graph.cached(("nn", "block_loop_free_stats", dtype), build)


def _inv_sqrt(deg: Tensor) -> Tensor:
    scale = deg.pow(-0.5)
    return scale.masked_fill(scale == float("inf"), 0.0)


def _sampled_edges(block: Block, graph: Graph, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """``(weight, keep)`` per block edge: the graph's weight (1 unweighted) times the
    destination's in-degree / sampled in-degree, and whether the edge is not a self loop."""
    weight = graph.edge_weight
    if weight is None:
        weight = torch.ones(block.num_edges, dtype=dtype, device=block.device)
    else:
        weight = weight[block.edge_id].to(dtype)
    full = graph.in_degree[block.dst_nodes].to(dtype)
    sampled = block.in_degree.to(dtype)
    scale = (full / sampled).masked_fill(sampled == 0, 0.0)
    return weight * scale[block.row], block.col != block.row


def gcn_block_terms(block: Block, improved: bool, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    r"""GCN on a block: ``(edge_weight [num_edges], self_weight [num_dst])`` such that the
    layer's propagation is ``block_aggregate(block, h, edge_weight) + self_weight * h[:num_dst]``.
    Degrees are the whole graph's with every self loop replaced by one (weight: the existing
    loop's in a weighted graph, else 1; 2 for added loops when ``improved`` and weighted, as
    :func:`galfast.nn.norm.gcn_norm`)."""
    graph = sampled_graph(block, "GCNConv")
    stats = _loop_free_stats(graph, dtype)
    fill = 2.0 if improved and graph.edge_weight is not None else 1.0
    existing = stats["loop"]
    loop_w = torch.where(torch.isnan(existing), torch.full_like(existing, fill), existing)
    dinv = _inv_sqrt(stats["in"] + loop_w)
    weight, keep = _sampled_edges(block, graph, dtype)
    dst, src = block.dst_nodes, block.src_nodes
    edge_weight = dinv[dst][block.row] * weight * dinv[src][block.col] * keep
    return edge_weight, loop_w[dst] * dinv[dst].square()


def _off_diagonal(
    normalization: Optional[str], deg: Tensor, weight: Tensor, src: Tensor, dst: Tensor
) -> Tensor:
    """Unscaled Laplacian entries of loop-free edges ``src -> dst`` with weights ``weight``, by
    the nodes' loop-free out-degrees ``deg`` (as :func:`galfast.nn.norm.cheb_norm`)."""
    if normalization is None:
        return -weight
    if normalization == "sym":
        scale = _inv_sqrt(deg)
        return -(scale[src] * weight * scale[dst])
    inv = deg.reciprocal().masked_fill(deg == 0, 0.0)
    return -(inv[src] * weight)


def _diagonal(normalization: Optional[str], deg: Tensor, nodes: Tensor) -> Tensor:
    return deg[nodes] if normalization is None else deg.new_ones(nodes.numel())


def _lambda_max(graph: Graph, normalization: Optional[str], dtype: torch.dtype) -> Tensor:
    """cheb_norm's default lambda_max on the whole graph: twice its Laplacian's largest
    entry; cached."""

    def build():
        deg = _loop_free_stats(graph, dtype)["out"]
        n, device = graph.num_nodes, graph.device
        row = torch.repeat_interleave(torch.arange(n, device=device), graph.in_degree)
        free = row != graph.col
        weight = graph.edge_weight
        if weight is None:
            weight = torch.ones(int(free.sum()), dtype=dtype, device=device)
        else:
            weight = weight[free].to(dtype)
        off = _off_diagonal(normalization, deg, weight, graph.col[free], row[free])
        entries = torch.cat([off, _diagonal(normalization, deg, torch.arange(n, device=device))])
        return 2.0 * entries.max() if entries.numel() else deg.new_tensor(2.0)

    return graph.cached(("nn", "block_cheb_lambda_max", normalization, dtype), build)


def cheb_block_terms(
    block: Block, normalization: Optional[str], lambda_max, dtype: torch.dtype
) -> tuple[Tensor, Tensor]:
    r"""ChebConv's scaled Laplacian on a block (:func:`galfast.nn.norm.cheb_norm` with the whole
    graph's out-degrees and lambda_max): ``(off [num_edges], diag [num_dst])`` with
    :math:`\tilde L h` = ``block_aggregate(block, h, off) + diag * h[:num_dst]``."""
    graph = sampled_graph(block, "ChebConv")
    deg = _loop_free_stats(graph, dtype)["out"]
    weight, keep = _sampled_edges(block, graph, dtype)
    src, dst = block.src_nodes[block.col], block.dst_nodes
    off = _off_diagonal(normalization, deg, weight, src, dst[block.row])
    diag = _diagonal(normalization, deg, dst)
    if lambda_max is None:
        lam = _lambda_max(graph, normalization, dtype)
    else:
        lam = torch.as_tensor(lambda_max, dtype=dtype, device=block.device)
    off, diag = (2.0 * off) / lam, (2.0 * diag) / lam
    off = off.masked_fill(off == float("inf"), 0.0) * keep
    diag = diag.masked_fill(diag == float("inf"), 0.0) - 1.0
    return off, diag
