"""A mini-batch of molecules: their atoms and edges merged into one block-diagonal graph."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from galfast._args import check_device
from galfast.graph import Graph

__all__ = ["MoleculeBatch", "ranges"]


def ranges(starts: Tensor, counts: Tensor) -> Tensor:
    """The concatenation of ``arange(s, s + c)`` over ``zip(starts, counts)`` (int64)."""
    total = int(counts.sum()) if counts.numel() else 0
    owner = torch.repeat_interleave(torch.arange(counts.numel(), device=counts.device), counts)
    first_slot = torch.cumsum(counts, 0) - counts
    return starts[owner] + torch.arange(total, device=counts.device) - first_slot[owner]


@dataclass(frozen=True, eq=False)
class MoleculeBatch:
    """``B`` molecules as one graph on ``n`` atoms with ``e`` directed edges.

    Attributes:
        x: ``[n, F]`` float32 atom features.
        z: ``[n]`` int64 atomic numbers.
        pos: ``[n, 3]`` float32 positions (Angstrom).
        edge_index: ``[2, e]`` int64 (source, target) atom ids within the batch, sorted by
            target then source, so row ``k`` is edge ``k`` of :attr:`graph`'s CSR.
        edge_attr: ``[e, D]`` float32 edge features, aligned with ``edge_index``.
        batch: ``[n]`` int64 position (0..B-1) of each atom's molecule in the batch.
        y: ``[B, T]`` float32 targets.
        ids: ``[B]`` int64 dataset index of each molecule (sensitive attributes are keyed by
            it).
        graph: the merged :class:`~galfast.Graph`; its CSR edge order is ``edge_index``'s.
    """

    x: Tensor
    z: Tensor
    pos: Tensor
    edge_index: Tensor
    edge_attr: Tensor
    batch: Tensor
    y: Tensor
    ids: Tensor
    graph: Graph

    @property
    def num_graphs(self) -> int:
        return self.ids.numel()

    @property
    def num_nodes(self) -> int:
        return self.x.size(0)

    @property
    def num_edges(self) -> int:
        return self.edge_index.size(1)

    def to(self, device: Any) -> MoleculeBatch:
        device = check_device(device)
        return MoleculeBatch(
            *(getattr(self, name).to(device) for name in self.__dataclass_fields__)
        )

    @staticmethod
    def csr_graph(edge_index: Tensor, num_nodes: int) -> Graph:
        """The :class:`~galfast.Graph` of an edge list sorted by (target, source) without
        duplicates, keeping its order (no re-sort, so edge features stay aligned)."""
        counts = torch.bincount(edge_index[1], minlength=num_nodes)
        rowptr = torch.zeros(num_nodes + 1, dtype=torch.long, device=edge_index.device)
        torch.cumsum(counts, 0, out=rowptr[1:])
        return Graph(rowptr, edge_index[0].contiguous(), num_nodes)
