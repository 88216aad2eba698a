"""The task side of GAL on knowledge graphs: a head scoring :class:`OneToNBatch` queries with a
:class:`~galfast.models.KGLinkPredictor`'s decoder, and the 1-N loss that matches it.

How the relation side reaches the decoder while :class:`GALTrainer` stays unchanged: the
trainer's encoder is ``model.encoder`` and returns the entity embeddings only (the adversary
reads those); CompGCN's relation embeddings depend on the encoder's parameters alone (each
layer maps them by ``W_rel``), so the head asks ``model.encoder.relations()`` for them inside
the same step, and their gradient reaches the encoder's parameters through it. The head holds
the whole model; the trainer's optimizers take each parameter once.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from galfast.models import KGLinkPredictor, one_to_n_loss
from galfast.models.one_to_n_loss import check_label_smoothing

__all__ = ["OneToNHead", "OneToNLoss"]


class OneToNHead(nn.Module):
    """``[B, N]`` logits of every entity for the batch's queries, from the trainer's entity
    embeddings ``z`` and ``model.encoder.relations()``.

    Example:
        >>> model = KGLinkPredictor(encoder, ConvEDecoder(num_entities, 200))
        >>> trainer = GALTrainer(encoder, OneToNHead(model), attacker,
        ...                      task_loss=OneToNLoss(0.1), lr=1e-3)
        >>> trainer.fit(ds.graph, OneToNBatches(queries, 128), sensitive, epochs=155)
    """

    def __init__(self, model: KGLinkPredictor) -> None:
        super().__init__()
        if not isinstance(model, KGLinkPredictor):
            raise ValueError(f"model must be a KGLinkPredictor, got {type(model).__name__}")
        self.model = model

    def forward(self, z: Tensor, batch: Any) -> Tensor:
        return self.model.score(z, self.model.encoder.relations(), batch.entity, batch.relation)


class OneToNLoss:
    """``one_to_n_loss(logits, batch.targets, label_smoothing)`` as a trainer ``task_loss``."""

    def __init__(self, label_smoothing: float = 0.1) -> None:
        check_label_smoothing(label_smoothing)  # now, not at the first step
        self.label_smoothing = label_smoothing

    def __call__(self, logits: Tensor, batch: Any) -> Tensor:
        return one_to_n_loss(logits, batch.targets, self.label_smoothing)
