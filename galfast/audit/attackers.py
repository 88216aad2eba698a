"""Post-hoc attackers: fresh models trained on frozen embeddings to recover an attribute."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor, nn

from galfast.audit.flat_params import flatten_parameters
from galfast.audit.head_gradients import HeadGradients
from galfast.audit.jobs import seeded_init
from galfast.audit.minibatches import adam, shuffled_batches
from galfast.gal.seeding import seeded_generator
from galfast.models.attacker import AttackerMLP

__all__ = ["FAMILIES", "AttackerConfig", "Predictions", "fit_and_predict", "training_epochs"]

FAMILIES = ("mlp", "linear")


@dataclass(frozen=True)
class AttackerConfig:
    """How post-hoc attackers are trained: Adam on mini-batches for ``epochs`` epochs (the
    paper's MovieLens attacker: 30 epochs of 256 users), or more when that gives fewer than
    ``min_steps`` updates (a small training split would otherwise leave the attacker
    unconverged and the audit would understate the leak)."""

    epochs: int = 30
    batch_size: int = 256
    lr: float = 0.01
    min_steps: int = 500
    hidden: Sequence[int] = (32, 32)


@dataclass(frozen=True, eq=False)
class Predictions:
    """Test-set outputs as numpy-ready tensors: ``pred`` (class ids, 0/1 label matrix or
    values) and, for binary attributes, ``scores`` = P(A=1)."""

    pred: Tensor
    scores: Optional[Tensor]


def spread(std: Tensor) -> Tensor:
    """Per-column standard deviations to divide by: a constant column's 0 becomes 1 (it stays
    0 after centring). A floor of 1e-12 hid columns whose spread is below it (embeddings of
    scale 1e-13: the attackers read features of 0.1 and reported no leak)."""
    return torch.where(std > 0, std, torch.ones_like(std))


def _build(family: str, in_dim: int, out_dim: int, hidden: Sequence[int]) -> nn.Module:
    if family == "mlp":
        return AttackerMLP(in_dim, out_dim, hidden)
    return nn.Linear(in_dim, out_dim)


def training_epochs(config: AttackerConfig, rows: int) -> int:
    """``config.epochs``, or more when that gives fewer than ``config.min_steps`` steps."""
    batches_per_epoch = -(-rows // config.batch_size)
    return max(config.epochs, -(-config.min_steps // batches_per_epoch))


def fit_and_predict(
    family: str,
    kind: str,
    num_outputs: int,
    x_train: Tensor,
    y_train: Tensor,
    x_test: Tensor,
    *,
    seed: int,
    config: AttackerConfig,
) -> Predictions:
    """Trains a fresh ``family`` attacker (``"mlp"``: :class:`~galfast.models.AttackerMLP`;
    ``"linear"``: logistic / softmax / linear regression) on ``(x_train, y_train)`` and
    predicts ``x_test``.

    Features are standardised with the training split's mean and std; continuous targets
    likewise (predictions are mapped back). Initialisation and batch order are keyed by
    ``seed``. Losses are the TV adversary's (:func:`~galfast.gal.tv_loss`).
    """
    mean, std = x_train.mean(0), spread(x_train.std(0, unbiased=False))
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
    y_mean = y_std = None
    if kind == "continuous":
        y_mean, y_std = y_train.mean(0), spread(y_train.std(0, unbiased=False))
        y_train = (y_train - y_mean) / y_std
    # Initialise on the CPU generator only, leaving the caller's generator states untouched.
    with seeded_init(seed):
        model = _build(family, x_train.size(1), num_outputs, config.hidden).to(x_train.device)
    model = model.to(x_train.dtype)
    optimizer = adam([flatten_parameters(model)], config.lr)
    gradients = HeadGradients(model, kind)
    gen = seeded_generator(seed)
    n = x_train.size(0)
    model.train()
    for _ in range(training_epochs(config, n)):
        order = torch.randperm(n, generator=gen).to(x_train.device)
        for xb, yb in shuffled_batches(order, config.batch_size, x_train, y_train):
            gradients(xb, yb)  # loss.backward()'s gradients of tv_loss, bitwise
            optimizer.step()
    model.eval()
    with torch.no_grad():
        out = model(x_test)
    if kind == "binary":
        scores = torch.sigmoid(out.view(-1))
        return Predictions((scores > 0.5).long(), scores)
    if kind == "categorical":
        return Predictions(out.argmax(dim=1), None)
    if kind == "multilabel":
        return Predictions((out > 0).long(), None)
    return Predictions(out * y_std + y_mean, None)
