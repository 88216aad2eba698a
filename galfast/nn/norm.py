"""Graph normalisations of the layers, as pure functions of a Graph, cached on it.

Each function returns what the layer aggregates over: a (possibly derived) Graph and per-edge
weights in that Graph's CSR order. What depends only on the graph (derived graphs, weights of
an unweighted or stored-weight graph) is computed once and cached on the input Graph with
``graph.cached``; weights given per call (e.g. learnable ones) are normalised per call, so
gradients flow to them as in PyG.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from galfast.graph import Graph
from galfast.nn._graph_input import csr_from_coo
from galfast.ops._functorch import transforms_active

__all__ = ["carry_weights", "cheb_norm", "gcn_norm", "self_loops_removed", "self_loops_replaced"]

_CHEB_NORMALIZATIONS = (None, "sym", "rw")


def _derive(graph: Graph, add_loops: bool) -> tuple[Graph, Tensor]:
    """The graph without self loops (plus one loop per node when `add_loops`) and, for each of
    its edges, the position in `graph` it comes from; an added loop comes from the node's last
    existing loop (as PyG's ``add_remaining_self_loops`` keeps that weight) or from -1. In a
    bipartite graph, node i's loop is the edge i -> i for i < min(num_src_nodes, num_nodes)
    (as PyG's GATConv adds them)."""
    row, col, n = graph.row, graph.col, graph.num_nodes
    position = torch.arange(graph.num_edges, device=graph.device)
    is_loop = row == col
    # One nonzero for the three gathers (a boolean index runs its own per tensor).
    source = (~is_loop).nonzero().view(-1)
    rows, cols = row.index_select(0, source), col.index_select(0, source)
    if add_loops:
        looped = min(n, graph.num_src_nodes)
        nodes = torch.arange(looped, device=graph.device)
        last_loop = torch.full((looped,), -1, dtype=torch.long, device=graph.device)
        last_loop.scatter_reduce_(0, row[is_loop], position[is_loop], "amax")
        rows, cols = torch.cat([rows, nodes]), torch.cat([cols, nodes])
        source = torch.cat([source, last_loop])
    bipartite = graph.num_src_nodes if graph.is_bipartite else None
    derived, order = csr_from_coo(rows, cols, n, bipartite)
    return derived, source[order]


def self_loops_replaced(graph: Graph) -> tuple[Graph, Tensor]:
    """``graph`` with every self loop removed and exactly one added per node (what PyG's
    GCNConv and GATConv aggregate over), and the source position of each edge (see
    :func:`carry_weights`). Cached on ``graph``."""
    return graph.cached(("nn", "self_loops_replaced"), lambda: _derive(graph, add_loops=True))


def self_loops_removed(graph: Graph) -> tuple[Graph, Tensor]:
    """``graph`` without its self loops (what PyG's ChebConv aggregates over), and the source
    position of each edge. Cached on ``graph``."""
    return graph.cached(("nn", "self_loops_removed"), lambda: _derive(graph, add_loops=False))


def carry_weights(
    source: Tensor, edge_weight: Optional[Tensor], fill: float, dtype: torch.dtype
) -> Tensor:
    """Weights of a derived graph: ``edge_weight[source[e]]`` (1 when unweighted), and `fill`
    where ``source[e] == -1`` (an added self loop)."""
    if edge_weight is None:
        ones = torch.ones(source.numel(), dtype=dtype, device=source.device)
        return ones.masked_fill(source < 0, fill)
    # Index -1 picks the appended fill value.
    return torch.cat([edge_weight, edge_weight.new_full((1,), fill)])[source]


def _cacheable(graph: Graph, edge_weight: Optional[Tensor]) -> bool:
    """Weights that are part of the graph (none, or the Graph's own constant ones)."""
    return edge_weight is None or (
        edge_weight is graph.edge_weight and not edge_weight.requires_grad
    )


def _check_sym_degrees(deg: Tensor, layer: str, direction: str, remedy: str) -> Tensor:
    """``deg``, after checking a symmetric normalisation is defined for it: a negative weighted
    degree (negative edge weights) has no :math:`d^{-1/2}`, so PyG's output would be NaN; say
    so rather than let a kernel blame the NaN weights that follow. Not checked while tracing
    or under torch.func (vmap cannot branch on values): the output is then NaN there, as PyG's."""
    if torch.compiler.is_compiling() or transforms_active():
        return deg
    if bool((deg < 0).any()):
        node = int((deg < 0).nonzero()[0])
        raise ValueError(
            f"{layer} is undefined here: node {node} has a negative weighted {direction} "
            f"({float(deg[node]):g}, from negative edge weights), which has no D^-1/2; "
            f"{remedy}"
        )
    return deg


def _inv_sqrt(deg: Tensor) -> Tensor:
    scale = deg.pow(-0.5)
    return scale.masked_fill(scale == float("inf"), 0.0)


def gcn_norm(
    graph: Graph,
    edge_weight: Optional[Tensor] = None,
    *,
    improved: bool = False,
    add_self_loops: bool = True,
    dtype: torch.dtype = torch.float32,
) -> tuple[Graph, Optional[Tensor]]:
    r"""GCN's symmetric normalisation :math:`\hat D^{-1/2} \hat A \hat D^{-1/2}`.

    :math:`\hat A = A + fI` with every existing self loop replaced by one per node (PyG's
    ``add_remaining_self_loops``: an existing loop keeps its weight, an added one gets
    :math:`f` = 2 if ``improved`` else 1) when ``add_self_loops``, and
    :math:`\hat d_i = \sum_{j \to i} \hat a_{ij}` (weighted in-degree, parallel edges counted).

    Returns:
        ``(graph, weight)``: the graph to aggregate over and the normalised weights in its CSR
        order, or ``weight=None`` when unweighted; then the weights are exactly
        :math:`1/\sqrt{d_i d_j}`, which ``aggregate(..., norm="gcn")`` computes on the fly.
        Note: for ``improved=True`` without edge weights, added loops get weight 2 as
        documented by PyG (PyG's own edge_index path ignores ``improved`` in that case).
    """
    target, source = graph, None
    if add_self_loops:
        target, source = self_loops_replaced(graph)
    if edge_weight is None and not (add_self_loops and improved):
        return target, None
    fill = 2.0 if improved else 1.0

    def build() -> Tensor:
        weight = edge_weight
        if source is not None:
            weight = carry_weights(source, edge_weight, fill, dtype)
        elif weight is None:
            weight = torch.ones(target.num_edges, dtype=dtype, device=target.device)
        deg = weight.new_zeros(target.num_nodes).index_add(0, target.row, weight)
        remedy = "use non-negative edge weights, or normalize=False"
        scale = _inv_sqrt(_check_sym_degrees(deg, "GCN's normalisation", "in-degree", remedy))
        return scale[target.col] * weight * scale[target.row]

    if _cacheable(graph, edge_weight):
        key = ("nn", "gcn_norm", improved, add_self_loops, edge_weight is None, dtype)
        return target, graph.cached(key, build)
    return target, build()


def cheb_gcn_form(
    graph: Graph,
    edge_weight: Optional[Tensor] = None,
    *,
    normalization: Optional[str] = "sym",
    lambda_max: Optional[float] = None,
) -> Optional[Graph]:
    r"""The loop-free graph ``g`` when ChebConv's scaled Laplacian is exactly
    :math:`\tilde L x = -D^{-1/2} A D^{-1/2} x` = ``-aggregate(g, x, norm="gcn")``, else None.

    That holds for the ``"sym"`` normalisation of an unweighted graph with
    :math:`\lambda_{max} = 2` (the default: the diagonal part :math:`2/\lambda_{max} - 1`
    vanishes) whose in- and out-degrees agree node by node (PyG normalises by out-degrees,
    ``aggregate`` by in-degrees). It saves reading a per-edge weight array in every
    aggregation, forward and backward. The degree check is done once and cached on the graph.
    """
    if normalization != "sym" or not _cacheable(graph, edge_weight):
        return None
    if isinstance(lambda_max, Tensor) or lambda_max not in (None, 2.0):
        return None  # a tensor is checked by cheb_norm, without a host sync here
    if graph.edge_weight is not None:
        return None
    if torch.compiler.is_compiling():
        return None  # the degree check reads values, which a traced graph cannot (cheb_norm can)
    target, _ = self_loops_removed(graph)
    balanced = target.cached(
        ("nn", "in_degree_equals_out_degree"),
        lambda: bool(torch.equal(target.in_degree, target.out_degree)),
    )
    return target if balanced else None


def cheb_norm(
    graph: Graph,
    edge_weight: Optional[Tensor] = None,
    *,
    normalization: Optional[str] = "sym",
    lambda_max: Optional[float] = None,
    dtype: torch.dtype = torch.float32,
) -> tuple[Graph, Tensor, Tensor]:
    r"""ChebConv's scaled Laplacian :math:`\tilde L = 2L/\lambda_{max} - I`, split into its
    off-diagonal part (a loop-free graph with per-edge weights) and its diagonal.

    Self loops are dropped first; :math:`d_j = \sum_{j \to i} w_{ji}` (weighted out-degree, as
    PyG's ``get_laplacian``). Then :math:`L = D - A` (``None``),
    :math:`I - D^{-1/2} A D^{-1/2}` (``"sym"``) or :math:`I - D^{-1} A` (``"rw"``, scaled by the
    source's degree), and :math:`\lambda_{max} = 2 \max_{ij} L_{ij}` unless given: a value,
    or one per node (a batch of graphs; each edge is scaled by its source's value).

    Returns:
        ``(graph, off_diagonal, diagonal)``: :math:`\tilde L x` is
        ``aggregate(graph, x, off_diagonal) + diagonal[:, None] * x``.
    """
    if normalization not in _CHEB_NORMALIZATIONS:
        raise ValueError(
            f"normalization must be one of {_CHEB_NORMALIZATIONS}, got {normalization!r}"
        )
    target, source = self_loops_removed(graph)
    per_node = isinstance(lambda_max, Tensor) and lambda_max.numel() != 1
    if per_node and lambda_max.shape != (graph.num_nodes,):
        raise ValueError(
            f"lambda_max must be a single value or one per node [{graph.num_nodes}] (the "
            f"graph's value for each node of a batch), got shape {list(lambda_max.shape)}"
        )

    def build() -> tuple[Tensor, Tensor]:
        weight = carry_weights(source, edge_weight, 1.0, dtype)
        deg = weight.new_zeros(target.num_nodes).index_add(0, target.col, weight)
        if normalization is None:
            off, diag = -weight, deg
        elif normalization == "sym":
            remedy = "use normalization='rw' or None, or non-negative edge weights"
            deg = _check_sym_degrees(deg, "normalization='sym'", "out-degree", remedy)
            scale = _inv_sqrt(deg)
            off, diag = -(scale[target.col] * weight * scale[target.row]), torch.ones_like(deg)
        else:
            inv = deg.reciprocal().masked_fill(deg == 0, 0.0)
            off, diag = -(inv[target.col] * weight), torch.ones_like(deg)
        entries = torch.cat([off, diag])
        if lambda_max is not None:
            lam = torch.as_tensor(lambda_max, dtype=entries.dtype, device=entries.device)
        elif entries.numel():
            lam = 2.0 * entries.max()
        else:
            lam = entries.new_tensor(2.0)
        # Per node (a batch of graphs): an edge takes its source's value, as PyG's ChebConv.
        lam_off = lam[target.col] if per_node else lam
        off, diag = (2.0 * off) / lam_off, (2.0 * diag) / lam
        off = off.masked_fill(off == float("inf"), 0.0)
        diag = diag.masked_fill(diag == float("inf"), 0.0) - 1.0
        return off, diag

    if _cacheable(graph, edge_weight) and not isinstance(lambda_max, Tensor):
        key = ("nn", "cheb_norm", normalization, lambda_max, edge_weight is None, dtype)
        return (target, *graph.cached(key, build))
    return (target, *build())


def sparse_self_loops(
    graph: Graph, edge_weight: Optional[Tensor], fill: float, *, keep_existing: bool, dtype
) -> tuple[Graph, Tensor]:
    """GCN's self loops the way PyG adds them to a sparse adjacency: one loop per node
    weighted ``fill`` plus, with ``keep_existing`` (torch.sparse: loops are appended and the
    duplicates summed), the node's existing loop weights; without it (torch_sparse's
    ``fill_diag``), existing loops are dropped. Returns the graph and its per-edge weights."""
    target, source = self_loops_replaced(graph)
    weight = carry_weights(source, edge_weight, fill, dtype)
    loops = target.row == target.col
    added = torch.full((graph.num_nodes,), fill, dtype=weight.dtype, device=weight.device)
    if keep_existing:
        existing = graph.row == graph.col
        base = torch.ones(graph.num_edges, dtype=weight.dtype, device=weight.device)
        values = base if edge_weight is None else edge_weight
        added = added.index_add(0, graph.row[existing], values[existing])
    return target, torch.where(loops, added[target.row], weight)
