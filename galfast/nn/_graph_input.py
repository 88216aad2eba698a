"""Turns a layer's graph argument, a PyG-style ``edge_index`` or a :class:`~galfast.Graph`,
into a Graph plus edge weights in its CSR order.

An ``edge_index`` is read the way PyG reads it: every column is one edge, so parallel
(duplicate) edges stay separate edges, and self loops are ordinary edges. Its CSR is built
once per tensor and reused while that tensor lives and is not modified in place (the cache is
keyed on the tensor's identity and version and dropped when the tensor is freed; a copy of the
tensor is compared on each hit too, since edits through ``.data`` or ``.numpy()`` leave the
version unchanged: one comparison, cheap next to a layer), so calling
several layers, or many epochs, with the same ``edge_index`` sorts it only once. Passing a
Graph skips even that look-up and is the fast path.
"""

from __future__ import annotations

import weakref
from typing import Optional, Union

import torch
from torch import Tensor

from galfast.graph import Graph, _check_index, lexsort

__all__ = ["csr_from_coo", "graph_and_order", "graph_input", "unweighted"]

# id(edge_index) -> (weak reference, tensor version, copy, num_nodes, Graph, input order)
_GRAPHS: dict[int, tuple[weakref.ref, int, Tensor, int, Graph, Tensor]] = {}


def csr_from_coo(rows: Tensor, cols: Tensor, num_nodes: int) -> tuple[Graph, Tensor]:
    """The Graph with edges ``cols[e] -> rows[e]``, parallel edges kept, sorted by (row, col)
    with ties in input order; returns it and ``order``, the input position of each CSR edge."""
    order = lexsort([rows, cols], [num_nodes, num_nodes])
    rows = rows[order]
    rowptr = torch.zeros(num_nodes + 1, dtype=torch.long, device=rows.device)
    rowptr[1:] = torch.cumsum(torch.bincount(rows, minlength=num_nodes), 0)
    graph = Graph(rowptr, cols[order], num_nodes)
    graph.cached("row", lambda: rows)
    return graph, order


def _edge_index_graph(edge_index: Tensor, num_nodes: int) -> tuple[Graph, Tensor]:
    hit = _GRAPHS.get(id(edge_index))
    if hit is not None:
        ref, version, copy, nodes, graph, order = hit
        if (
            ref() is edge_index
            and version == edge_index._version
            and nodes == num_nodes
            and torch.equal(copy, edge_index)
        ):
            return graph, order
    checked, num_nodes = _check_index(edge_index, num_nodes)
    graph, order = csr_from_coo(checked[1], checked[0], num_nodes)
    key = id(edge_index)
    _GRAPHS[key] = (
        weakref.ref(edge_index, lambda _: _GRAPHS.pop(key, None)),
        edge_index._version,
        edge_index.clone(),
        num_nodes,
        graph,
        order,
    )
    return graph, order


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


def graph_input(
    edge_index_or_graph: Union[Tensor, Graph],
    num_nodes: int,
    edge_weight: Optional[Tensor] = None,
) -> tuple[Graph, Optional[Tensor]]:
    """Returns ``(graph, weight)``: the Graph of a layer's input and the edge weights in its CSR
    order (``edge_weight`` reordered, or the Graph's stored weights, or None).

    ``edge_weight`` follows the columns of an ``edge_index``, or the CSR order of a Graph.
    """
    if isinstance(edge_index_or_graph, Graph):
        graph = edge_index_or_graph
        if graph.num_nodes != num_nodes:
            raise ValueError(f"x has {num_nodes} rows but the graph has {graph.num_nodes} nodes")
        if edge_weight is None:
            return graph, graph.edge_weight
        _check_weight(edge_weight, graph.num_edges, graph.device, "the graph's CSR edge order")
        return graph, edge_weight
    if not isinstance(edge_index_or_graph, Tensor):
        raise ValueError(
            "expected an edge_index tensor [2, num_edges] or a galfast.Graph, got "
            f"{type(edge_index_or_graph).__name__}"
        )
    graph, order = _edge_index_graph(edge_index_or_graph, num_nodes)
    if edge_weight is None:
        return graph, None
    _check_weight(edge_weight, graph.num_edges, graph.device, "one per edge_index column")
    return graph, edge_weight[order]


def unweighted(graph: Graph) -> Graph:
    """``graph``'s structure without its stored edge weights (for layers that, like PyG's,
    ignore weights), cached on it."""
    if graph.edge_weight is None:
        return graph
    return graph.cached(
        ("nn", "unweighted"), lambda: Graph(graph.rowptr, graph.col, graph.num_nodes)
    )


def graph_and_order(
    edge_index_or_graph: Union[Tensor, Graph], num_nodes: int
) -> tuple[Graph, Optional[Tensor]]:
    """Returns ``(graph, order)``: the Graph of a layer's input and, for an ``edge_index``, the
    input column of each CSR edge (per-edge features follow with ``features[order]``); order
    is None for a Graph, whose per-edge features are already in CSR order."""
    if isinstance(edge_index_or_graph, Graph):
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
    return _edge_index_graph(edge_index_or_graph, num_nodes)
