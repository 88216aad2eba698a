"""The tuned neural attacker: a small seeded search over capacity and training, early stopped.

Everything here sees the attacker's training nodes only. The caller carves a validation split
out of them (:func:`validation_split`); configurations are ranked on it and every run stops
early on it, so the test nodes never influence a choice.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import asdict, dataclass
from numbers import Real
from typing import Any, Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from galfast.audit.attackers import spread
from galfast.audit.checks import count
from galfast.audit.flat_params import flatten_parameters, unflatten_parameters
from galfast.audit.head_gradients import HeadGradients
from galfast.audit.jobs import seeded_init
from galfast.audit.metrics import PRIMARY_METRIC, higher_is_stronger, primary_metric
from galfast.audit.minibatches import adam, shuffled_batches
from galfast.audit.split import share_count
from galfast.gal.adversary_losses import tv_loss
from galfast.gal.seeding import seeded_generator
from galfast.models.attacker import AttackerMLP

__all__ = ["HeadConfig", "SearchConfig", "candidate_configs", "fit_head", "validation_split"]


@dataclass(frozen=True)
class SearchConfig:
    """How hard the strong audit's neural attackers are tuned.

    Attributes:
        trials: configurations tried per (attribute, attack, family) on the validation split
            (the first is :data:`DEFAULT_HEAD`, the rest a seeded draw from the grid).
        max_epochs, patience: each run stops after ``patience`` epochs without a lower
            validation loss (at most ``max_epochs``) and keeps its best weights.
        batch_size: mini-batch size of the optimizer steps.
        val_fraction: share of the attacker's training nodes held out for validation.
    """

    trials: int = 6
    max_epochs: int = 60
    patience: int = 6
    batch_size: int = 256
    val_fraction: float = 0.2

    def __post_init__(self) -> None:
        # Counts: 1.5 trials failed deep in the audit, NaN epochs trained none and crashed,
        # True passed as 1; each is stored as a plain int.
        for name in ("trials", "max_epochs", "patience", "batch_size"):
            object.__setattr__(self, name, count(name, getattr(self, name), 1))
        fraction = self.val_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, Real) or not 0 < fraction < 1:
            raise ValueError(f"val_fraction must be a number in (0, 1), got {fraction!r}")


@dataclass(frozen=True)
class HeadConfig:
    """One attacker head: ``depth`` hidden layers of ``width`` (0 = a linear model), Adam with
    ``lr`` and ``weight_decay``, and class-balanced loss weights when ``balanced`` (macro-F1
    rewards the minority classes that an unweighted loss neglects)."""

    depth: int
    width: int
    lr: float
    weight_decay: float
    balanced: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


DEFAULT_HEAD = HeadConfig(depth=2, width=64, lr=0.01, weight_decay=0.0, balanced=False)
_GRID = {
    "depth": (0, 1, 2, 3),
    "width": (32, 64, 128, 256),
    "lr": (0.003, 0.01, 0.03),
    "weight_decay": (0.0, 1e-4, 1e-3),
    "balanced": (False, True),
}


def candidate_configs(trials: int, kind: str, seed: int) -> list[HeadConfig]:
    """:data:`DEFAULT_HEAD` and ``trials - 1`` other grid points drawn without replacement,
    keyed by ``seed``. Class balancing only exists for binary and categorical attributes."""
    balanced = _GRID["balanced"] if kind in ("binary", "categorical") else (False,)
    grid = [
        HeadConfig(*values)
        for values in itertools.product(
            _GRID["depth"], _GRID["width"], _GRID["lr"], _GRID["weight_decay"], balanced
        )
        if values[0] > 0 or values[1] == _GRID["width"][0]  # width is moot for a linear head
    ]
    grid.remove(DEFAULT_HEAD)
    return [DEFAULT_HEAD, *random.Random(seed).sample(grid, min(trials - 1, len(grid)))]


def validation_split(n: int, fraction: float, seed: int) -> tuple[Tensor, Tensor]:
    """``(fit, val)`` positions among ``n`` training rows: a seeded shuffle with ``fraction``
    (at least one row, leaving at least one) held out."""
    perm = torch.randperm(n, generator=seeded_generator(seed))
    num_val = min(max(1, share_count(fraction, n)), n - 1)
    return perm[num_val:], perm[:num_val]


def _class_weights(kind: str, y: Tensor, num_outputs: int) -> Optional[Tensor]:
    classes = 2 if kind == "binary" else num_outputs
    counts = torch.bincount(y.view(-1).long(), minlength=classes).double()
    weights = counts.sum() / (classes * counts.clamp_min(1))
    return weights.masked_fill(counts == 0, 0.0)


def _loss(out: Tensor, y: Tensor, kind: str, weights: Optional[Tensor]) -> Tensor:
    if weights is None:
        return tv_loss(out, y, kind)
    w = weights.to(out.dtype)
    if kind == "binary":
        per = F.binary_cross_entropy_with_logits(out.view(-1), y.to(out.dtype), reduction="none")
        wy = w[y.view(-1)]
        return (per * wy).sum() / wy.sum()
    return F.cross_entropy(out, y, weight=w)


def _decode(kind: str, out: Tensor) -> tuple[Tensor, Optional[Tensor]]:
    """(predictions, binary scores) from the head's outputs on standardised targets."""
    if kind == "binary":
        scores = torch.sigmoid(out.view(-1))
        return (scores > 0.5).long(), scores
    if kind == "categorical":
        return out.argmax(dim=1), None
    if kind == "multilabel":
        return (out > 0).long(), None
    return out, None


@dataclass
class FittedHead:
    """A trained head: ``predict`` maps raw features to (predictions, binary scores);
    ``val_score`` is the primary metric on the validation rows, ``epochs`` the epochs run."""

    model: nn.Module
    mean: Tensor
    std: Tensor
    y_mean: Optional[Tensor]
    y_std: Optional[Tensor]
    kind: str
    val_score: float
    epochs: int

    def predict(self, x: Tensor) -> tuple[Tensor, Optional[Tensor]]:
        with torch.no_grad():
            out = self.model((x - self.mean) / self.std)
        pred, scores = _decode(self.kind, out)
        if self.kind == "continuous":
            pred = pred * self.y_std + self.y_mean
        return pred, scores


def _numpy_targets(kind: str, y: Tensor) -> np.ndarray:
    out = y.detach().cpu().numpy()
    return out.astype(np.int64) if kind == "multilabel" else out


def primary_score(kind: str, y: Tensor, pred: Tensor, scores: Optional[Tensor]) -> float:
    """The primary metric of ``pred`` against ``y``, signed so that larger = stronger."""
    value = primary_metric(kind, _numpy_targets(kind, y), pred.detach().cpu().numpy())
    return value if higher_is_stronger(PRIMARY_METRIC[kind]) else -value


def fit_head(
    config: HeadConfig,
    kind: str,
    num_outputs: int,
    x_fit: Tensor,
    y_fit: Tensor,
    x_val: Tensor,
    y_val: Tensor,
    *,
    seed: int,
    search: SearchConfig,
) -> FittedHead:
    """Trains one head on the fit rows, stopping early on the validation rows' loss, and
    scores the best epoch's weights on the validation rows."""
    mean, std = x_fit.mean(0), spread(x_fit.std(0, unbiased=False))
    xf, xv = (x_fit - mean) / std, (x_val - mean) / std
    y_mean = y_std = None
    yf, yv = y_fit, y_val
    if kind == "continuous":
        y_mean, y_std = y_fit.mean(0), spread(y_fit.std(0, unbiased=False))
        yf, yv = (y_fit - y_mean) / y_std, (y_val - y_mean) / y_std
    weights = _class_weights(kind, y_fit, num_outputs) if config.balanced else None
    hidden = (config.width,) * config.depth
    with seeded_init(seed):
        model = AttackerMLP(xf.size(1), num_outputs, hidden).to(xf.device, xf.dtype)
    flat = flatten_parameters(model)  # one tensor for Adam and the snapshots
    optimizer = adam([flat], config.lr, config.weight_decay)
    gradients = HeadGradients(model, kind, weights)
    gen = seeded_generator(seed)
    n = xf.size(0)
    best_loss, best, since, epochs = float("inf"), None, 0, 0
    while epochs < search.max_epochs:
        epochs += 1
        model.train()
        order = torch.randperm(n, generator=gen).to(xf.device)
        for xb, yb in shuffled_batches(order, search.batch_size, xf, yf):
            gradients(xb, yb)  # loss.backward()'s gradients of _loss, bitwise
            optimizer.step()
        model.eval()
        with torch.no_grad():
            val_loss = float(_loss(model(xv), yv, kind, weights))
        if math.isnan(val_loss):  # ranks below every finite loss
            val_loss = math.inf
        # The first epoch is always kept: a validation loss that is never finite (0/0 when
        # balanced weights zero every validation row's class) left no weights to restore.
        if best is None or val_loss < best_loss:
            best_loss, since = val_loss, 0
            best = flat.clone() if best is None else best.copy_(flat)
        else:
            since += 1
            if since >= search.patience:
                break
    flat.copy_(best)
    unflatten_parameters(model)
    model.eval()
    fitted = FittedHead(model, mean, std, y_mean, y_std, kind, 0.0, epochs)
    pred, scores = fitted.predict(x_val)
    fitted.val_score = primary_score(kind, y_val, pred, scores)
    return fitted
