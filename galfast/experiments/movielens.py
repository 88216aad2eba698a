"""The MovieLens setup (real and synthetic): rating prediction.

A learned 20-wide embedding + BatchNorm + one GNN layer, a bilinear decoder with 2 bases over
the 5 rating levels (cross-entropy), 25 epochs of 8,192 ratings per batch, an adversary step
on 256 users after every task step; task = test RMSE of the expected rating; gender is the
sensitive attribute.
"""

from __future__ import annotations

import torch
from torch import Tensor

from galfast.datasets import RatingDataset
from galfast.experiments.config import ExperimentConfig
from galfast.experiments.encoders import make_encoder
from galfast.experiments.setup import Setup, attacker_for
from galfast.gal import SensitiveAttribute
from galfast.models import BilinearRatingDecoder
from galfast.train import EdgeHead, GALTrainer, RatingBatches, rating_cross_entropy

__all__ = ["MOVIELENS"]

BATCH_SIZE = 8192  # ratings per task step


def train(
    cfg: ExperimentConfig,
    dataset: RatingDataset,
    attributes: tuple[SensitiveAttribute, ...],
    epochs: int,
    progress: bool,
) -> tuple[Tensor, dict[str, float]]:
    encoder = make_encoder(
        cfg.encoder, (20,), num_features=0, num_nodes=dataset.num_nodes, embedding_dim=20
    )
    decoder = BilinearRatingDecoder(20, dataset.num_rating_levels, num_bases=2)
    trainer = GALTrainer.from_config(
        encoder,
        EdgeHead(decoder),
        attacker_for(attributes, 20),
        task_loss=rating_cross_entropy,
        config=cfg.gal_config(adv_batch_size=256),
        device=cfg.device,
        # full batches of one size and the epoch's last: two shapes, each captured once
        cuda_graphs=cfg.cuda_graphs_for(by_default=True),
    )
    ratings = dataset.train_ratings
    levels = range(1, dataset.num_rating_levels + 1)
    # On the training device: a batch is then gathered there, with no copy per step.
    ratings = ratings.to(trainer.device)
    batches = RatingBatches(ratings[:, :2].t(), ratings[:, 2], levels=levels, batch_size=BATCH_SIZE)
    trainer.fit(dataset.graph, batches, attributes, epochs, progress=progress)
    z = trainer.embed()
    test = dataset.test_ratings.to(z.device)
    with torch.no_grad():
        decoder.eval()
        predicted = decoder.expected_rating(decoder(z[test[:, 0]], z[test[:, 1]]))
    rmse = float(torch.sqrt(((predicted - test[:, 2].to(predicted.dtype)) ** 2).mean()))
    return z, {"rmse": rmse}


def _check_rating_split(dataset: RatingDataset) -> None:
    """Training needs a rating, the test RMSE at least one held-out rating."""
    train, test = dataset.train_idx.numel(), dataset.test_idx.numel()
    if not (train and test):
        raise ValueError(
            f"the {dataset.name} rating split holds {train} training and {test} test "
            "rating(s): training and the test RMSE need at least one each; adjust "
            "test_fraction, or use more ratings"
        )


MOVIELENS = Setup(
    name="movielens",
    dataset_type=RatingDataset,
    epochs=25,
    attacker_epochs=30,
    attribute="gender",
    task_metric="rmse",
    train=train,
    check_data=_check_rating_split,
    steps_per_epoch=lambda dataset: -(-dataset.train_idx.numel() // BATCH_SIZE),
)
