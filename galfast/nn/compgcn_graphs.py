"""The two directed graphs a CompGCN layer aggregates over, built once from a knowledge graph's
triples and cached per edge-list tensor."""

from __future__ import annotations

import weakref
from typing import NamedTuple, Optional

import torch
from torch import Tensor

from galfast._versions import tensor_versions
from galfast.graph import Graph, _check_index, _count, _index_tensor, plain_tensor, plain_tensors
from galfast.nn._graph_input import csr_from_coo

__all__ = ["CompGCNGraphs", "compgcn_graphs"]


class CompGCNGraphs(NamedTuple):
    """A knowledge graph's triples ``(head, r, tail)`` as CompGCN (Vashishth et al.) aggregates
    them. ``incoming``: every head receives from its tail along relation ``r`` (CompGCN's "in"
    direction, weight ``W_in``); ``outgoing``: every tail receives from its head along the
    inverse relation ``r + num_relations`` (its "out" direction, ``W_out``). Parallel edges are
    kept (each triple is one message, as in CompGCN); relation embeddings have
    ``2 * num_relations`` rows."""

    incoming: Graph
    outgoing: Graph
    num_relations: int


# id(edge_index) -> (weak reference, edge_index version, copy, edge_type copy, key, graphs)
_CACHE: dict[int, tuple] = {}


def _typed_csr(src: Tensor, dst: Tensor, types: Tensor, num_nodes: int) -> Graph:
    """The Graph of edges src -> dst with their relation ids, parallel edges kept, sorted by
    (dst, src) with ties in input order."""
    plain, order = csr_from_coo(dst, src, num_nodes)
    graph = Graph(plain.rowptr, plain.col, num_nodes, edge_type=types[order])
    graph.cached("row", lambda: plain.row)
    return graph


def _build(edge_index: Tensor, edge_type: Tensor, num_nodes: int, num_relations: int):
    head, tail = edge_index
    return CompGCNGraphs(
        _typed_csr(tail, head, edge_type, num_nodes),
        _typed_csr(head, tail, edge_type + num_relations, num_nodes),
        num_relations,
    )


def compgcn_graphs(
    edge_index: Tensor, edge_type: Tensor, num_nodes: Optional[int], num_relations: int
) -> CompGCNGraphs:
    """The :class:`CompGCNGraphs` of the triples ``(edge_index[0][k], edge_type[k],
    edge_index[1][k])`` (head, relation, tail), without inverse triples: the inverse direction
    is built here, as CompGCN's data loader adds it. Cached per ``edge_index`` tensor while it
    lives and is unchanged (a copy of both tensors is compared on every hit).

    Args:
        edge_index: ``[2, T]`` (head, tail) entity ids.
        edge_type: ``[T]`` relation ids in ``[0, num_relations)``.
        num_nodes: the entity count (``None``: one more than the largest id).
        num_relations: the number of relations, not counting inverses.
    """
    num_relations = _count("num_relations", num_relations)
    # PyG's EdgeIndex has no storage of its own: read, and copy, the tensor it wraps.
    data = plain_tensor(edge_index)
    if torch.compiler.is_compiling() and num_nodes is not None:
        # torch.compile and torch.export trace no id()-keyed cache and no check that reads
        # values (as layer_graph's edge_index path): build every call; the kernel checks ids.
        types = _index_tensor("edge_type", edge_type)
        if types.numel():  # a traced check: it raises when the compiled graph runs
            torch._assert_async(
                ((types >= 0) & (types < num_relations)).all(),
                f"edge_type must lie in [0, num_relations = {num_relations})",
            )
        return _build(data, types, num_nodes, num_relations)
    hit = _CACHE.get(id(edge_index))
    if hit is not None:
        ref, version, copy, type_copy, key, graphs = hit
        if (
            ref() is edge_index
            and version == tensor_versions([edge_index])[0]
            and key == (num_nodes, num_relations)
            and torch.equal(copy, data)
            and isinstance(edge_type, Tensor)
            and torch.equal(type_copy, edge_type)
        ):
            return graphs
    checked, nodes = _check_index(data, num_nodes)
    types = _index_tensor("edge_type", edge_type)
    if types.shape != (checked.size(1),):
        raise ValueError(
            f"edge_type must have shape [{checked.size(1)}] (one per edge_index column), "
            f"got {list(types.shape)}"
        )
    if types.device != checked.device:
        raise ValueError(f"edge_type is on {types.device} but edge_index is on {checked.device}")
    if types.numel() and (int(types.min()) < 0 or int(types.max()) >= num_relations):
        raise ValueError(
            f"edge_type holds relations in [{int(types.min())}, {int(types.max())}] but they "
            f"must lie in [0, num_relations = {num_relations}) (pass the triples without their "
            "inverses: the layer adds them)"
        )
    with plain_tensors():  # kept for later calls, training ones too
        graphs = _build(checked, types, nodes, num_relations)
        copies = data.clone(), types.clone()
    key = id(edge_index)
    _CACHE[key] = (
        weakref.ref(edge_index, lambda _: _CACHE.pop(key, None)),
        tensor_versions([edge_index])[0],  # None for an inference tensor: the copies decide
        *copies,
        (num_nodes, num_relations),
        graphs,
    )
    return graphs
