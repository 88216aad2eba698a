"""Adapters turning a decoder into a task head ``head(z, batch)`` for the ready-made batches."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

__all__ = ["EdgeHead", "GraphHead", "NodeHead"]


class NodeHead(nn.Module):
    """``module(z[batch.nodes])`` for :class:`NodeBatch` (node classification/regression)."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, z: Tensor, batch: Any) -> Tensor:
        return self.module(z[batch.nodes])


class EdgeHead(nn.Module):
    """``decoder(z[batch.src], z[batch.dst])`` for :class:`LinkBatch` and :class:`RatingBatch`
    (e.g. :class:`galfast.models.DotProductLinkDecoder`,
    :class:`galfast.models.BilinearRatingDecoder`)."""

    def __init__(self, decoder: nn.Module) -> None:
        super().__init__()
        self.decoder = decoder

    def forward(self, z: Tensor, batch: Any) -> Tensor:
        return self.decoder(z[batch.src], z[batch.dst])


class GraphHead(nn.Module):
    """``module(z)`` for :class:`GraphBatch`, whose ``z`` already holds one row per graph."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, z: Tensor, batch: Any) -> Tensor:
        return self.module(z)
