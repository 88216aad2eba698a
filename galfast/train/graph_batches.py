"""Graph-level task batches (molecules): each batch is encoded on its own, not the full graph."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from galfast.graph import Graph
from galfast.train.batching import check_batch_size, index_batches

__all__ = ["GraphBatch", "GraphBatches"]


@dataclass(frozen=True, eq=False)
class GraphBatch:
    """Several small graphs merged into one block-diagonal :class:`~galfast.Graph`.

    Attributes:
        x: ``[n, F]`` node features of all graphs, stacked.
        graph: the merged graph on ``n`` nodes.
        batch: ``[n]`` int64 position (0..B-1) of each node's graph within the batch.
        y: ``[B, ...]`` task targets per graph.
        ids: ``[B]`` int64 dataset index of each graph (sensitive attributes are keyed by it).
    """

    x: Tensor
    graph: Graph
    batch: Tensor
    y: Tensor
    ids: Tensor

    def to(self, device) -> GraphBatch:
        return GraphBatch(
            self.x.to(device),
            self.graph.to(device),
            self.batch.to(device),
            self.y.to(device),
            self.ids.to(device),
        )

    def encode(self, encoder: nn.Module) -> tuple[Tensor, Tensor]:
        """The trainer's hook for batches that bring their own graph: returns the per-graph
        embeddings ``encoder(x, graph, batch)`` ``[B, D]`` and the ids their rows belong to."""
        return encoder(self.x, self.graph, self.batch), self.ids


class GraphBatches:
    """Re-iterable mini-batches of whole graphs for graph-level tasks (QM9-style).

    Args:
        graphs: a sequence of objects with ``x`` ``[n_i, F]`` and ``edge_index`` ``[2, e_i]``
            (e.g. ``torch_geometric.data.Data``).
        y: ``[G, ...]`` one task target per graph.
        batch_size: graphs per batch (128 in the paper's QM9 runs).
        shuffle: reshuffle every epoch.

    The encoder must accept ``(x, graph, batch)`` and return one embedding per graph.
    """

    def __init__(
        self, graphs: Sequence[Any], y: Tensor, batch_size: int = 128, shuffle: bool = True
    ) -> None:
        if len(graphs) != y.size(0):
            raise ValueError(f"y has {y.size(0)} rows for {len(graphs)} graphs")
        for i, g in enumerate(graphs):
            if not isinstance(getattr(g, "x", None), Tensor) or not isinstance(
                getattr(g, "edge_index", None), Tensor
            ):
                raise ValueError(f"graph {i} lacks an x or edge_index tensor")
        check_batch_size(batch_size)
        self.graphs, self.y = list(graphs), y
        self.batch_size, self.shuffle = batch_size, shuffle

    def __len__(self) -> int:
        return -(-len(self.graphs) // self.batch_size)

    def __iter__(self) -> Iterator[GraphBatch]:
        for ids in index_batches(len(self.graphs), self.batch_size, self.shuffle):
            parts = [self.graphs[i] for i in ids.tolist()]
            sizes = torch.tensor([p.x.size(0) for p in parts])
            offsets = torch.cumsum(sizes, 0) - sizes
            edges = torch.cat([p.edge_index.long() + int(o) for p, o in zip(parts, offsets)], 1)
            num_nodes = int(sizes.sum())
            graph = Graph.from_edge_index(edges, num_nodes)
            batch = torch.repeat_interleave(torch.arange(len(parts)), sizes)
            x = torch.cat([p.x for p in parts])
            yield GraphBatch(
                x, graph, batch.to(x.device), self.y[ids.to(self.y.device)], ids.to(x.device)
            )
