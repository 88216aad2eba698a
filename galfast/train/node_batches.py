"""Node-level task batches (node classification or regression on a subset of nodes)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

from galfast.train.batching import check_batch_size, index_batches

__all__ = ["NodeBatch", "NodeBatches"]


@dataclass(frozen=True, eq=False)
class NodeBatch:
    """``nodes`` ``[B]`` int64 ids and their task targets ``y`` ``[B, ...]``."""

    nodes: Tensor
    y: Tensor

    def to(self, device) -> NodeBatch:
        return NodeBatch(self.nodes.to(device), self.y.to(device))


class NodeBatches:
    """Re-iterable mini-batches of labelled nodes.

    Args:
        nodes: ``[K]`` int64 ids of the training nodes.
        y: ``[K, ...]`` their targets (class ids, values).
        batch_size: nodes per batch; None = all in one batch (full-batch training).
        shuffle: reshuffle every epoch.

    Example:
        >>> batches = NodeBatches(torch.arange(4), torch.zeros(4), batch_size=2, shuffle=False)
        >>> [b.nodes.tolist() for b in batches]
        [[0, 1], [2, 3]]
    """

    def __init__(
        self, nodes: Tensor, y: Tensor, batch_size: Optional[int] = None, shuffle: bool = True
    ) -> None:
        if nodes.dim() != 1 or nodes.dtype not in (torch.int64, torch.int32):
            raise ValueError(
                f"nodes must be a 1-D int64 tensor, got shape {list(nodes.shape)} "
                f"dtype {nodes.dtype}"
            )
        if y.size(0) != nodes.numel():
            raise ValueError(f"y has {y.size(0)} rows for {nodes.numel()} nodes")
        check_batch_size(batch_size)
        self.nodes, self.y = nodes.long(), y
        self.batch_size, self.shuffle = batch_size, shuffle

    def __len__(self) -> int:
        size = self.batch_size or max(self.nodes.numel(), 1)
        return -(-self.nodes.numel() // size)

    def __iter__(self) -> Iterator[NodeBatch]:
        for idx in index_batches(self.nodes.numel(), self.batch_size, self.shuffle):
            idx = idx.to(self.nodes.device)
            yield NodeBatch(self.nodes[idx], self.y[idx])
