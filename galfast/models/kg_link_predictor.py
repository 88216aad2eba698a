"""A knowledge-graph link predictor: an encoder giving entity and relation embeddings and a 1-N
decoder scoring every entity for ``(entity, relation)`` queries (CompGCN-ConvE, -DistMult)."""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from galfast._dtypes import holds_integers

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
        """The decoder's logits for queries over already computed embeddings.

        Checks the ids' shapes and dtypes always and their values where they lie on the CPU
        (reading CUDA values would stall each training step; :meth:`forward` in eval mode and
        :meth:`scorer` check them on every device). Under torch.compile and torch.export the
        value checks are asserts in the traced graph: a RuntimeError when it runs."""
        _check_query_ids(entity, relation, entities.size(0), relations.size(0), values=False)
        if entity.device.type == "cpu" and relation.device.type == "cpu":
            _check_id_values(entity, relation, entities.size(0), relations.size(0))
        return self._decode(entities, relations, entity, relation)

    def _decode(self, entities: Tensor, relations: Tensor, entity: Tensor, relation: Tensor):
        # int64: a uint8 index selects as a mask, rows other than the ids.
        return self.decoder(entities[entity.long()], relations[relation.long()], entities)

    def forward(self, entity: Tensor, relation: Tensor) -> Tensor:
        entities, relations = self.encoder.embed()
        if self.training:  # per training step: no host sync on CUDA
            return self.score(entities, relations, entity, relation)
        _check_query_ids(entity, relation, entities.size(0), relations.size(0))
        return self._decode(entities, relations, entity, relation)

    @torch.no_grad()
    def scorer(self) -> Callable[[Tensor, Tensor], Tensor]:
        """``score(entity, relation) -> [B, N]`` over embeddings computed once, now (for
        :func:`evaluate_link_prediction`; call :meth:`eval` first). The callable's
        ``num_entities`` and ``num_relations`` (``R``, without inverses) let
        :func:`evaluate_link_prediction` check its filter against the model."""
        entities, relations = self.encoder.embed()
        return _Scorer(self, entities, relations)


class _Scorer:
    """:meth:`KGLinkPredictor.scorer`'s callable: checks every id, then scores."""

    def __init__(self, model: KGLinkPredictor, entities: Tensor, relations: Tensor) -> None:
        self.model, self.entities, self.relations = model, entities, relations
        self.num_entities = entities.size(0)
        self.num_relations = relations.size(0) // 2

    def __call__(self, entity: Tensor, relation: Tensor) -> Tensor:
        _check_query_ids(entity, relation, self.entities.size(0), self.relations.size(0))
        with torch.no_grad():
            return self.model._decode(self.entities, self.relations, entity, relation)


def _check_query_ids(
    entity: Tensor, relation: Tensor, num_entities: int, num_relation_rows: int, values=True
) -> None:
    """Raises ValueError unless `entity` and `relation` are integer ``[B]`` tensors (with
    `values`: entities in ``[0, N)``, relations in ``[0, 2R)``)."""
    for name, ids in (("entity", entity), ("relation", relation)):
        if not isinstance(ids, Tensor) or ids.dim() != 1:
            raise ValueError(f"{name} must be a [B] tensor of ids, got {_shape(ids)}")
        if not holds_integers(ids):
            raise ValueError(f"{name} ids must be integers, got {ids.dtype}")
    if entity.shape != relation.shape:
        raise ValueError(
            f"entity and relation must have the same length, got {entity.numel()} and "
            f"{relation.numel()}"
        )
    if values:
        _check_id_values(entity, relation, num_entities, num_relation_rows)


def _check_id_values(
    entity: Tensor, relation: Tensor, num_entities: int, num_relation_rows: int
) -> None:
    if entity.numel() == 0:
        return
    # int64: a bound past a narrow dtype's range wraps in the comparison.
    entity, relation = entity.long(), relation.long()
    checks = (
        (
            ((entity < 0) | (entity >= num_entities)).any(),
            f"entity holds an id outside [0, {num_entities})",
        ),
        (
            ((relation < 0) | (relation >= num_relation_rows)).any(),
            f"relation holds an id outside [0, {num_relation_rows}) (relations and their "
            "inverses, 2R)",
        ),
    )
    for outside, message in checks:
        if torch.compiler.is_compiling():
            # torch.compile / torch.export cannot branch on a value: the traced graph checks
            # when it runs (a RuntimeError with the same message).
            torch._assert_async(~outside, message)
        elif bool(outside):
            raise ValueError(message)


def _shape(value: object) -> str:
    return str(list(value.shape)) if isinstance(value, Tensor) else type(value).__name__
