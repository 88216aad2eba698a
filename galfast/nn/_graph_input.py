"""Turns a layer's graph argument into a :class:`~galfast.Graph` plus edge weights in its CSR
order. Accepted, as PyG's layers accept them:

- a ``[2, E]`` ``edge_index`` (read as PyG reads it: every column is one edge, parallel edges
  stay separate, self loops are ordinary edges; ``flow="target_to_source"`` swaps its rows);
- a ``torch.sparse`` adjacency ``adj_t`` (COO, CSR or CSC) in PyG's transposed convention:
  ``adj_t[i, j]`` is the edge ``j -> i``, its values the edge weights;
- a ``torch_sparse.SparseTensor`` ``adj_t`` (recognised by its ``csr()`` and
  ``sparse_sizes()``, so torch_sparse is never imported here);
- a :class:`~galfast.Graph` (the fast path: no look-up at all).

Sources and destinations may be two node sets (PyG's bipartite ``(x_src, x_dst)``); the Graph
is then bipartite (``num_src_nodes`` columns, ``num_nodes`` rows).

The CSR of an ``edge_index`` or a sparse adjacency is built once per object and reused while
that object lives and is unchanged: the cache is keyed on the object's identity, dropped when
it is freed, and a hit is checked against a copy of the index tensors (edits through ``.data``
or ``.numpy()`` leave the version counter unchanged: one comparison, cheap next to a layer).
A CSR adjacency is used in place (no copy); only the per-call values are reordered when the
input order is not the CSR order. So calling several layers, or many epochs, with the same
input sorts it only once.
"""

from __future__ import annotations

import weakref
from typing import Any, NamedTuple, Optional, Union

import torch
from torch import Tensor

from galfast.graph import (
    Graph,
    _check_index,
    _count,
    _index_tensor,
    lexsort,
    plain_tensor,
    plain_tensors,
)

__all__ = [
    "LayerGraph",
    "csr_from_coo",
    "graph_and_order",
    "graph_input",
    "is_adjacency",
    "layer_graph",
    "unweighted",
]

FLOWS = ("source_to_target", "target_to_source")


class LayerGraph(NamedTuple):
    """What a layer aggregates over."""

    graph: Graph  # CSR by destination, bipartite when the node sets differ
    weight: Optional[Tensor]  # [num_edges] weights in CSR order, or None
    order: Optional[Tensor]  # [num_edges] input position of each CSR edge; None: identity
    sparse: bool  # the input was a sparse adjacency (its values are the weights)


class _Entry(NamedTuple):
    ref: weakref.ref
    version: int
    copies: tuple[Tensor, ...]
    key: tuple
    graph: Graph
    order: Optional[Tensor]


# id(input object) -> its cached CSR
_GRAPHS: dict[int, _Entry] = {}


def csr_from_coo(
    rows: Tensor, cols: Tensor, num_nodes: int, num_src_nodes: Optional[int] = None
) -> tuple[Graph, Tensor]:
    """The Graph with edges ``cols[e] -> rows[e]``, parallel edges kept, sorted by (row, col)
    with ties in input order; returns it and ``order``, the input position of each CSR edge.
    Both are kept by the callers' caches, so they are plain tensors under inference mode too."""
    with plain_tensors():
        return _csr_from_coo(rows, cols, num_nodes, num_src_nodes)


def _csr_from_coo(
    rows: Tensor, cols: Tensor, num_nodes: int, num_src_nodes: Optional[int]
) -> tuple[Graph, Tensor]:
    num_src = num_nodes if num_src_nodes is None else num_src_nodes
    if _sorted_by_row_then_col(rows, cols):
        # E.g. a Graph's own edges less its self loops: the stable sort would keep every edge
        # in place (a check of a few passes over E instead of sorting, 0.15 s at 1.8M edges).
        order = torch.arange(rows.numel(), device=rows.device)
        rows, cols = rows.clone(), cols.clone()  # the Graph owns its index tensors
    else:
        order = lexsort([rows, cols], [num_nodes, num_src])
        rows, cols = rows[order], cols[order]
    # A fixed-size scatter rather than bincount, whose shape torch.compile cannot know.
    counts = torch.zeros(num_nodes, dtype=torch.long, device=rows.device)
    counts.scatter_add_(0, rows, torch.ones_like(rows))
    rowptr = torch.zeros(num_nodes + 1, dtype=torch.long, device=rows.device)
    rowptr[1:] = torch.cumsum(counts, 0)
    graph = Graph(rowptr, cols, num_nodes, num_src_nodes=num_src_nodes)
    graph.cached("row", lambda: rows)
    return graph, order


def _sorted_by_row_then_col(rows: Tensor, cols: Tensor) -> bool:
    """The edges are in (row, col) order already (ties allowed)."""
    if torch.compiler.is_compiling():
        # Reading values would break the traced graph: sort, as before. Checked first: after a
        # nonzero (e.g. self loops removed) numel() is data-dependent, and even comparing it
        # to 2 fails under fullgraph=True and torch.export.
        return False
    if rows.numel() < 2:
        return True
    step = rows[1:] - rows[:-1]
    return bool(((step > 0) | ((step == 0) & (cols[1:] >= cols[:-1]))).all())


def is_adjacency(obj: Any) -> bool:
    """A torch.sparse tensor or a torch_sparse.SparseTensor (duck-typed)."""
    if isinstance(obj, Tensor):
        return obj.layout in (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc)
    return callable(getattr(obj, "csr", None)) and callable(getattr(obj, "sparse_sizes", None))


def _cached(obj: Any, key: tuple, indices: tuple[Tensor, ...]) -> Optional[_Entry]:
    hit = _GRAPHS.get(id(obj))
    if hit is None or hit.ref() is not obj or hit.key != key:
        return None
    if isinstance(obj, Tensor) and hit.version != _version(obj):
        return None
    if len(hit.copies) != len(indices):
        return None
    if not all(c.shape == t.shape and torch.equal(c, t) for c, t in zip(hit.copies, indices)):
        return None
    return hit


def _version(t: Tensor) -> Optional[int]:
    """The version counter; None for an inference tensor, which keeps none (a hit is then
    decided by the copies alone)."""
    return None if t.is_inference() else t._version


def _remember(obj: Any, key: tuple, indices: tuple, graph: Graph, order: Optional[Tensor]):
    ident = id(obj)
    version = _version(obj) if isinstance(obj, Tensor) else 0
    with plain_tensors():
        copies = tuple(t.clone() for t in indices)
    ref = weakref.ref(obj, lambda _: _GRAPHS.pop(ident, None))
    _GRAPHS[ident] = _Entry(ref, version, copies, key, graph, order)


def _check_bipartite_ids(src: Tensor, dst: Tensor, num_src: int, num_dst: int) -> None:
    """Checks the ids of a two-node-set edge_index against the node counts."""
    for name, ids, bound in (("source", src, num_src), ("target", dst, num_dst)):
        if not ids.numel():
            continue
        low, high = int(ids.min()), int(ids.max())
        if low < 0:
            raise ValueError(f"edge_index holds a negative {name} node id ({low})")
        if high >= bound:
            raise ValueError(
                f"edge_index refers to {name} node {high} but there are {bound} {name} nodes "
                f"(ids must lie in [0, {bound}))"
            )


def _edge_index_graph(
    edge_index: Tensor, num_dst: Optional[int], num_src: Optional[int], flow: str
) -> tuple[Graph, Tensor]:
    key = ("edge_index", num_dst, num_src, flow)
    traced = torch.compiler.is_compiling() and num_dst is not None
    # PyG's EdgeIndex is a wrapper without storage of its own: the kernels, and the cache's
    # copy, take the tensor it wraps (the cache stays keyed on the wrapper, which persists).
    data = plain_tensor(edge_index)
    hit = None if traced else _cached(edge_index, key, (data,))
    if hit is not None:
        return hit.graph, hit.order
    checked = _index_tensor("edge_index", data)
    if checked.dim() != 2 or checked.size(0) != 2:
        raise ValueError(f"edge_index must have shape [2, num_edges], got {list(checked.shape)}")
    if flow == "target_to_source":
        checked = checked.flip(0)
    src, dst = checked[0], checked[1]
    if traced:
        # torch.compile traces no id()-keyed cache and no check that reads values (each would
        # break the graph): build the CSR every call, as PyG's layers do; the kernels still
        # check every index they read.
        return csr_from_coo(dst, src, num_dst, num_src if num_src != num_dst else None)
    if num_src is None or num_src == num_dst:
        _, num_nodes = _check_index(checked, num_dst)
        graph, order = csr_from_coo(dst, src, num_nodes)
    else:
        _check_bipartite_ids(src, dst, num_src, num_dst)
        graph, order = csr_from_coo(dst, src, num_dst, num_src)
    _remember(edge_index, key, (data,), graph, order)
    return graph, order


def coalesced(adj_t: Tensor) -> Tensor:
    """A torch.sparse COO ``adj_t`` with its duplicate entries summed, as torch.sparse (and
    PyG) read it: stored twice, an entry would count as two edges in a mean, max or softmax.
    A coalesced one, or another layout, as it is."""
    if adj_t.layout == torch.sparse_coo and not adj_t.is_coalesced():
        return adj_t.coalesce()
    return adj_t


def _torch_sparse_graph(adj_t: Tensor) -> tuple[Graph, Optional[Tensor], Tensor]:
    """(graph, order, values) of a torch.sparse adj_t [num_dst, num_src]."""
    adj_t = coalesced(adj_t)  # a new tensor each call when it was not: no cache hit then
    if adj_t.dim() != 2:
        raise ValueError(f"a sparse adj_t must be 2-D [num_dst, num_src], got {list(adj_t.shape)}")
    num_dst, num_src = adj_t.shape
    if adj_t.layout == torch.sparse_csr:
        indices = (adj_t.crow_indices(), adj_t.col_indices())
        values = adj_t.values()
    elif adj_t.layout == torch.sparse_csc:
        indices = (adj_t.ccol_indices(), adj_t.row_indices())
        values = adj_t.values()
    else:
        indices = (adj_t._indices(),)
        values = adj_t._values()
    key = ("sparse", adj_t.layout, num_dst, num_src)
    hit = _cached(adj_t, key, indices)
    if hit is not None:
        return hit.graph, hit.order, values
    bipartite = num_src if num_src != num_dst else None
    if adj_t.layout == torch.sparse_csr:
        rowptr, col = (_index_tensor(name, t) for name, t in zip(("crow_indices", "col"), indices))
        graph, order = Graph(rowptr, col, num_dst, num_src_nodes=bipartite), None
    else:
        if adj_t.layout == torch.sparse_csc:
            ccol, row = (_index_tensor(n, t) for n, t in zip(("ccol_indices", "row"), indices))
            col = torch.repeat_interleave(torch.arange(num_src, device=row.device), ccol.diff())
        else:
            row, col = _index_tensor("indices", indices[0])
        graph, order = csr_from_coo(row, col, num_dst, bipartite)
    _remember(adj_t, key, indices, graph, order)
    return graph, order, values


def _sparse_tensor_graph(adj_t: Any) -> tuple[Graph, Optional[Tensor]]:
    """(graph, values) of a torch_sparse.SparseTensor adj_t [num_dst, num_src]."""
    rowptr, col, values = adj_t.csr()
    num_dst, num_src = (int(s) for s in adj_t.sparse_sizes())
    key = ("SparseTensor", num_dst, num_src)
    hit = _cached(adj_t, key, (rowptr, col))
    if hit is not None:
        return hit.graph, values
    bipartite = num_src if num_src != num_dst else None
    graph = Graph(rowptr, col, num_dst, num_src_nodes=bipartite)
    _remember(adj_t, key, (rowptr, col), graph, None)
    return graph, values


def _check_weight(edge_weight: Tensor, num_edges: int, device: torch.device, order: str) -> None:
    if not isinstance(edge_weight, Tensor):
        raise ValueError(f"edge_weight must be a torch.Tensor, got {type(edge_weight).__name__}")
    if edge_weight.shape != (num_edges,):
        raise ValueError(
            f"edge_weight must have shape [{num_edges}] ({order}), got {list(edge_weight.shape)}"
        )
    if not edge_weight.dtype.is_floating_point:
        raise ValueError(f"edge_weight must be floating point, got {edge_weight.dtype}")
    if edge_weight.device != device:
        raise ValueError(f"edge_weight is on {edge_weight.device} but the graph is on {device}")


def _check_counts(graph: Graph, num_dst: Optional[int], num_src: Optional[int], what: str):
    if num_dst is not None and graph.num_nodes != num_dst:
        nodes = "destination nodes" if graph.is_bipartite else "nodes"
        raise ValueError(f"x has {num_dst} rows but the {what} has {graph.num_nodes} {nodes}")
    if num_src is not None and graph.num_src_nodes != num_src:
        raise ValueError(
            f"x has {num_src} source rows but the {what} has {graph.num_src_nodes} source nodes"
        )


def layer_graph(
    adjacency: Any,
    num_dst: Optional[int],
    num_src: Optional[int] = None,
    edge_weight: Optional[Tensor] = None,
    *,
    flow: str = "source_to_target",
) -> LayerGraph:
    """The :class:`LayerGraph` of a layer's graph argument (see the module docstring).

    ``num_dst`` / ``num_src`` are the node counts the features imply; ``num_src=None`` means
    one node set. As in PyG, ``num_dst=None`` takes a Graph's or sparse adjacency's own
    count, and for an ``edge_index`` ``num_src`` (PyG's destination count defaults to the
    source count), or the largest id + 1 with one node set and no count at all.
    ``edge_weight`` follows the columns of an ``edge_index`` or the CSR order of a Graph; a
    sparse adjacency carries its own values.
    """
    if flow not in FLOWS:
        raise ValueError(f"flow must be one of {FLOWS}, got {flow!r}")
    if isinstance(adjacency, Graph):
        adjacency.check_unmodified()  # layers aggregate over graphs derived from it, too
        if flow != "source_to_target":
            raise ValueError(
                "flow='target_to_source' is not supported with a galfast.Graph, whose CSR is "
                "by destination: pass the edge_index, or build the Graph from edge_index.flip(0)"
            )
        _check_counts(adjacency, num_dst, num_src if num_src is not None else num_dst, "graph")
        if edge_weight is None:
            return LayerGraph(adjacency, adjacency.edge_weight, None, False)
        _check_weight(edge_weight, adjacency.num_edges, adjacency.device, "the CSR edge order")
        return LayerGraph(adjacency, edge_weight, None, False)
    if is_adjacency(adjacency):
        if flow != "source_to_target":
            raise ValueError(
                "flow='target_to_source' is not supported with a sparse adj_t (PyG refuses it "
                "too): adj_t is already the transposed adjacency, so transpose it instead"
            )
        if edge_weight is not None:
            raise ValueError(
                "edge_weight must be None with a sparse adj_t: its values are the edge weights"
            )
        if isinstance(adjacency, Tensor):
            graph, order, values = _torch_sparse_graph(adjacency)
        else:
            (graph, values), order = _sparse_tensor_graph(adjacency), None
        _check_counts(graph, num_dst, num_src if num_src is not None else num_dst, "adj_t")
        if values is not None and order is not None:
            values = values[order]
        return LayerGraph(graph, values, order, True)
    if not isinstance(adjacency, Tensor):
        raise ValueError(
            "expected an edge_index tensor [2, num_edges], a sparse adj_t or a galfast.Graph, "
            f"got {type(adjacency).__name__}"
        )
    if num_dst is None and num_src is not None:
        # PyG: without x_dst or size[1], an edge_index has as many destinations as sources.
        num_dst = num_src
    if num_dst is not None:
        num_dst = _count("num_nodes", num_dst)
    graph, order = _edge_index_graph(adjacency, num_dst, num_src, flow)
    if edge_weight is None:
        return LayerGraph(graph, None, order, False)
    _check_weight(edge_weight, graph.num_edges, graph.device, "one per edge_index column")
    return LayerGraph(graph, edge_weight[order], order, False)


def graph_input(
    edge_index_or_graph: Union[Tensor, Graph],
    num_nodes: int,
    edge_weight: Optional[Tensor] = None,
) -> tuple[Graph, Optional[Tensor]]:
    """``(graph, weight)`` of a one-node-set input: :func:`layer_graph` without the order."""
    graph, weight, _, _ = layer_graph(edge_index_or_graph, num_nodes, None, edge_weight)
    return graph, weight


def unweighted(graph: Graph) -> Graph:
    """``graph``'s structure without its stored edge weights (for layers that, like PyG's,
    ignore weights), cached on it."""
    if graph.edge_weight is None:
        return graph
    return graph.cached(
        ("nn", "unweighted"),
        lambda: Graph(graph.rowptr, graph.col, graph.num_nodes, num_src_nodes=graph.num_src_nodes),
    )


def graph_and_order(
    edge_index_or_graph: Union[Tensor, Graph], num_nodes: int
) -> tuple[Graph, Optional[Tensor]]:
    """Returns ``(graph, order)``: the Graph of a layer's input and, for an ``edge_index``, the
    input column of each CSR edge (per-edge features follow with ``features[order]``); order
    is None for a Graph, whose per-edge features are already in CSR order."""
    if isinstance(edge_index_or_graph, Graph):
        edge_index_or_graph.check_unmodified()
        if edge_index_or_graph.num_nodes != num_nodes:
            raise ValueError(
                f"x has {num_nodes} rows but the graph has {edge_index_or_graph.num_nodes} nodes"
            )
        return edge_index_or_graph, None
    if not isinstance(edge_index_or_graph, Tensor):
        raise ValueError(
            "expected an edge_index tensor [2, num_edges] or a galfast.Graph, got "
            f"{type(edge_index_or_graph).__name__}"
        )
    return _edge_index_graph(edge_index_or_graph, num_nodes, None, "source_to_target")
