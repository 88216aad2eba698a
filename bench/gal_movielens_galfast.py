"""The GAL MovieLens-1M model of bench/gal_movielens_pyg.py built from galfast pieces and
trained by ``galfast.GALTrainer``.

Same model: ``EmbeddingEncoder`` (trainable embedding with ``max_norm=1`` as the original's,
applied by one vectorised renorm of the table; BatchNorm; two ``galfast.nn``
layers with no activation between them, fed a prebuilt ``galfast.Graph``),
``BilinearRatingDecoder`` (2 bases, 5 levels) behind an ``EdgeHead``, cross-entropy over the
levels, ``AttackerMLP`` 20-32-32-2 (LeakyReLU slope 0.01) on gradient-reversed user
embeddings, Adam (``amsgrad``, weight decay 1e-4) with the adversary's learning rate
``lr * lam``, an adversary step on 256 users after every task step. The trainer encodes the
whole graph once per task step and once per adversary step.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from gal_movielens_pyg import GALMovieLens, adam
from torch import Tensor, nn

import galfast.nn as gnn
from galfast import GALTrainer, Graph
from galfast.models import AttackerMLP, BilinearRatingDecoder, EmbeddingEncoder
from galfast.train import EdgeHead, RatingBatch, SensitiveAttribute, rating_cross_entropy

LAYERS = {
    "gcn": lambda dim: gnn.GCNConv(dim, dim),
    "gat": lambda dim: gnn.GATConv(dim, dim),
    "cheb": lambda dim: gnn.ChebConv(dim, dim, K=2),
}


def build_trainer(
    kind: str,
    num_nodes: int,
    *,
    lam: float,
    lr: float = 0.01,
    adv_batch_size: int | None = 256,
    embed_dim: int = 20,
    device: str = "cpu",
    cuda_graphs: bool = False,
) -> GALTrainer:
    """A GALTrainer around freshly initialised galfast modules (``kind`` in gcn, gat, cheb)."""
    encoder = EmbeddingEncoder(
        num_nodes,
        embed_dim,
        convs=[LAYERS[kind](embed_dim) for _ in range(2)],
        activation=nn.Identity(),
        max_norm=1.0,  # the original renormalises embedding rows to norm <= 1 in every forward
    )
    head = EdgeHead(BilinearRatingDecoder(embed_dim, num_levels=5, num_bases=2))
    attacker = AttackerMLP(embed_dim, 2, negative_slope=0.01)
    return GALTrainer(
        encoder,
        head,
        attacker,
        task_loss=rating_cross_entropy,
        distance="tv",
        lam=lam,
        adv_every=1,
        adv_batch_size=adv_batch_size,
        lr=lr,
        optimizer=adam,
        device=device,
        cuda_graphs=cuda_graphs,
    )


def gender_attribute(gender: Tensor) -> SensitiveAttribute:
    """Gender of users ``0 .. U-1`` (movies have none)."""
    return SensitiveAttribute(
        "gender", "binary", gender, index=torch.arange(gender.numel(), device=gender.device)
    )


def rating_batches(p_batches: Sequence[Tensor]) -> list[RatingBatch]:
    """``[B, 3]`` rows ``(user, level 0..4, movie)`` -> the trainer's ``RatingBatch``es."""
    return [RatingBatch(b[:, 0], b[:, 2], b[:, 1], (b[:, 1] + 1).float()) for b in p_batches]


def train_steps(
    trainer: GALTrainer, graph: Graph, batches: list[RatingBatch], gender: SensitiveAttribute
) -> dict:
    """Runs ``len(batches)`` training steps (task + adversary each) as one trainer epoch and
    returns its history record (mean task and adversary losses)."""
    trainer.fit(graph, batches, gender, epochs=trainer.epoch + 1, progress=False)
    return trainer.history[-1]


@torch.no_grad()
def copy_weights(trainer: GALTrainer, original: GALMovieLens) -> None:
    """Loads the original model's weights into the trainer's modules (same function)."""
    encoder, decoder = trainer.encoder, trainer.task_head.decoder
    encoder.embedding.weight.copy_(original.encoder.weight)
    encoder.norm.load_state_dict(original.batchnorm.state_dict())
    for mine, theirs in zip(encoder.convs, original.gnn):
        mine.load_state_dict(theirs.state_dict())
    bases = original.decoder.rel_embeds.weight.view_as(decoder.bases)
    decoder.bases.copy_(bases)
    decoder.coefficients.copy_(original.decoder.weight_scalars.t())
    trainer.attacker.net.load_state_dict(original.gender.state_dict())
