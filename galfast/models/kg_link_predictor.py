"""A knowledge-graph link predictor: an encoder giving entity and relation embeddings and a 1-N
decoder scoring every entity for ``(entity, relation)`` queries (CompGCN-ConvE, -DistMult)."""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

__all__ = ["KGLinkPredictor"]


class KGLinkPredictor(nn.Module):
    """``encoder.embed() -> (entities [N, D], relations [2R, D])`` with
    ``decoder(head [B, D], relation [B, D], entities [N, D]) -> [B, N]`` (e.g.
    :class:`CompGCNEncoder` with :class:`ConvEDecoder` or :class:`DistMultDecoder`).

    ``forward(entity [B], relation [B]) -> [B, N]`` logits of every entity as the answer
    (relations ``>= R`` are inverses: head queries); train with :func:`one_to_n_loss`.

    Example:
        >>> model = KGLinkPredictor(encoder, ConvEDecoder(ds.num_entities, 200))
        >>> logits = model(batch.entity, batch.relation)
        >>> metrics = evaluate_link_prediction(model.eval().scorer(), ds.test, known)
    """

    def __init__(self, encoder: nn.Module, decoder: nn.Module) -> None:
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def score(self, entities: Tensor, relations: Tensor, entity: Tensor, relation: Tensor):
        """The decoder's logits for queries over already computed embeddings."""
        return self.decoder(entities[entity], relations[relation], entities)

    def forward(self, entity: Tensor, relation: Tensor) -> Tensor:
        entities, relations = self.encoder.embed()
        return self.score(entities, relations, entity, relation)

    @torch.no_grad()
    def scorer(self) -> Callable[[Tensor, Tensor], Tensor]:
        """``score(entity, relation) -> [B, N]`` over embeddings computed once, now (for
        :func:`evaluate_link_prediction`; call :meth:`eval` first)."""
        entities, relations = self.encoder.embed()
        return lambda entity, relation: self.score(entities, relations, entity, relation)
