"""A learned-embedding encoder: one trainable vector per node, BatchNorm, then GNN layers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from torch import Tensor, nn

from galfast.graph import Graph

__all__ = ["EmbeddingEncoder"]


class EmbeddingEncoder(nn.Module):
    r"""The paper's MovieLens encoder: trainable node embeddings, BatchNorm, then message
    passing layers:

    .. math::
        h^{(0)} = \mathrm{BN}(E[\mathrm{ids}]), \qquad
        h^{(k)} = \sigma(\mathrm{conv}_k(h^{(k-1)}, G)) \;(k < K), \qquad
        z = \mathrm{conv}_K(h^{(K-1)}, G)

    Args:
        num_nodes: embedding rows (users + items for MovieLens: 9,940).
        dim: embedding size (20 in the paper).
        convs: layers called as ``conv(h, graph)`` (``galfast.nn`` layers; wrap PyG layers in
            :class:`galfast.train.EdgeIndexAdapter`). Empty = embeddings only.
        batch_norm: apply BatchNorm1d to the embeddings.
        activation: between layers (not after the last); default ReLU.

    Called as the trainer's encoder with node ids: ``encoder(ids, graph) -> [len(ids), D']``
    (``ids`` must cover all graph nodes, in order, whenever ``convs`` is not empty).

    Example:
        >>> enc = EmbeddingEncoder(10, 4)
        >>> enc(torch.arange(10), graph).shape  # doctest: +SKIP
        torch.Size([10, 4])
    """

    def __init__(
        self,
        num_nodes: int,
        dim: int,
        convs: Sequence[nn.Module] = (),
        batch_norm: bool = True,
        activation: Optional[nn.Module] = None,
    ) -> None:
        super().__init__()
        if num_nodes < 1 or dim < 1:
            raise ValueError("num_nodes and dim must be >= 1")
        self.embedding = nn.Embedding(num_nodes, dim)
        self.norm = nn.BatchNorm1d(dim) if batch_norm else nn.Identity()
        self.convs = nn.ModuleList(convs)
        self.activation = nn.ReLU() if activation is None else activation

    def forward(self, ids: Tensor, graph: Graph) -> Tensor:
        if self.convs and ids.numel() != graph.num_nodes:
            raise ValueError(
                f"message passing needs all {graph.num_nodes} node ids, got {ids.numel()}"
            )
        h = self.norm(self.embedding(ids))
        for i, conv in enumerate(self.convs):
            h = conv(h, graph)
            if i < len(self.convs) - 1:
                h = self.activation(h)
        return h
