"""The per-edge messages of a PyG layer, in PyG's order, for the aggregations that need them.

Learned or order-dependent aggregations (PyG's ``LSTMAggregation``, ``MLPAggregation``,
``SoftmaxAggregation``, ...) reduce a ``[E, F]`` tensor of messages ``x_j`` with the index of
each message's target. Order matters for some of them (an LSTM reads each neighbourhood as a
sequence), so the messages here follow exactly the order PyG's ``MessagePassing`` builds: the
columns of an ``edge_index``, the stored entries of a ``torch.sparse`` COO ``adj_t`` (as given,
coalesced or not), CSR or CSC order for those layouts, and row-major order (with its row
pointer) for a ``torch_sparse.SparseTensor``. A :class:`~galfast.Graph` has no PyG counterpart
and gives its CSR order.

The input has been checked by :func:`galfast.nn._graph_input.layer_graph` before this runs.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import torch
from torch import Tensor

from galfast.graph import Graph
from galfast.nn._graph_input import coalesced

__all__ = ["MessageEdges", "message_edges"]


class MessageEdges(NamedTuple):
    source: Tensor  # [E] source node of each message
    target: Tensor  # [E] target node of each message (PyG's ``index``)
    ptr: Optional[Tensor]  # [num_dst + 1] when ``target`` is sorted and PyG passes a pointer


def _expand(ptr: Tensor) -> Tensor:
    """Row id of each entry of a compressed pointer."""
    return torch.repeat_interleave(torch.arange(ptr.numel() - 1, device=ptr.device), ptr.diff())


def message_edges(adjacency: Any, graph: Graph, flow: str) -> MessageEdges:
    """The messages of ``adjacency`` (the layer's graph argument, already turned into
    ``graph`` by ``layer_graph``) in PyG's order."""
    if isinstance(adjacency, Graph):
        return MessageEdges(graph.col, graph.row, None)
    if isinstance(adjacency, Tensor):
        if adjacency.layout == torch.sparse_coo:
            rows, cols = coalesced(adjacency)._indices().long()
            return MessageEdges(cols, rows, None)
        if adjacency.layout == torch.sparse_csr:
            crow, col = adjacency.crow_indices().long(), adjacency.col_indices().long()
            return MessageEdges(col, _expand(crow), None)
        if adjacency.layout == torch.sparse_csc:
            ccol, row = adjacency.ccol_indices().long(), adjacency.row_indices().long()
            return MessageEdges(_expand(ccol), row, None)
        edge_index = adjacency.long()
        src, dst = (1, 0) if flow == "target_to_source" else (0, 1)
        return MessageEdges(edge_index[src], edge_index[dst], None)
    # torch_sparse.SparseTensor: PyG reads coo() and hands the aggregation its rowptr.
    rowptr, col, _ = adjacency.csr()
    return MessageEdges(col.long(), _expand(rowptr.long()), rowptr.long())
