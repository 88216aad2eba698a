"""The task side of GAL: heads ``head(z, batch)`` turning a decoder into predictions for the
ready-made batches, and the losses ``loss(pred, batch)`` that match them."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from galfast import ops
from galfast._dtypes import holds_integers

__all__ = [
    "EdgeHead",
    "GraphHead",
    "NodeHead",
    "classification_loss",
    "link_loss",
    "rating_cross_entropy",
    "rating_mse",
    "regression_loss",
]


class NodeHead(nn.Module):
    """``module(z[batch.nodes])`` for :class:`NodeBatch` (node classification/regression)."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, z: Tensor, batch: Any) -> Tensor:
        # index_select, not gather_rows: a node batch holds few rows, where gather_rows' fixed
        # cost shows (Cora's 140 training nodes, forward and backward on one CPU thread: 110
        # against 196 us; z[ids] 97 us, but it reads negative ids from the end)
        return self.module(_rows(z, batch.nodes, "batch.nodes", gather=_index_select))


class EdgeHead(nn.Module):
    """``decoder(z[batch.src], z[batch.dst])`` for :class:`LinkBatch` and :class:`RatingBatch`
    (e.g. :class:`galfast.models.DotProductLinkDecoder`,
    :class:`galfast.models.BilinearRatingDecoder`). A decoder with an ``edge_scores(z, src,
    dst)`` method (``BilinearRatingDecoder``: fused, no gathered rows) gets the embeddings and
    the ids instead when both ids are 1-D integer tensors."""

    def __init__(self, decoder: nn.Module) -> None:
        super().__init__()
        self.decoder = decoder

    def forward(self, z: Tensor, batch: Any) -> Tensor:
        src, dst = _ids(batch.src, "batch.src"), _ids(batch.dst, "batch.dst")
        if hasattr(self.decoder, "edge_scores") and _id_tensor(src) and _id_tensor(dst):
            return self.decoder.edge_scores(z, src, dst)
        return self.decoder(_rows(z, src, "batch.src"), _rows(z, dst, "batch.dst"))


def _id_tensor(ids: Any) -> bool:
    return isinstance(ids, Tensor) and ids.dim() == 1 and ids.dtype in (torch.int64, torch.int32)


def _ids(ids: Any, name: str) -> Any:
    """``ids`` with integer tensors of other dtypes as int64 (``z[uint8 ids]`` reads them as a
    mask); float ids are refused by name (torch: "tensors used as indices must be long...").
    A bool mask passes: it selects rows."""
    if not isinstance(ids, Tensor) or ids.dtype == torch.bool:
        return ids
    if not holds_integers(ids):
        raise ValueError(f"{name} must hold integer node ids, got {ids.dtype}")
    return ids if ids.dtype in (torch.int64, torch.int32) else ids.long()


def _index_select(z: Tensor, ids: Tensor) -> Tensor:
    return z.index_select(0, ids)


def _rows(z: Tensor, ids: Any, name: str, gather=None) -> Tensor:
    """``z[ids]``; by ``gather`` for a 1-D id tensor. The default, ``ops.gather_rows``, gives
    the same rows and, summed in the same order, the same gradient, without advanced
    indexing's per-call setup and with a scatter-add backward 3-4x faster than index_select's
    index_add_ (MovieLens: 2x 8,192 rows a step). Both refuse negative ids, which ``z[ids]``
    would read from the end (the wrong nodes), on the CPU; their IndexError is raised again
    naming ``name``."""
    ids = _ids(ids, name)
    if _id_tensor(ids):
        try:
            return (gather or ops.gather_rows)(z, ids)
        except IndexError as err:
            raise ValueError(
                f"{name} holds a node id outside [0, {z.size(0)}) (rows of z): {err}"
            ) from err
    return z[ids]


class GraphHead(nn.Module):
    """``module(z)`` for :class:`GraphBatch`, whose ``z`` already holds one row per graph."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, z: Tensor, batch: Any) -> Tensor:
        return self.module(z)


def classification_loss(pred: Tensor, batch: Any) -> Tensor:
    """Cross-entropy of ``[B, C]`` scores against ``batch.y`` class ids (node or graph batches)."""
    return _cross_entropy(pred, batch.y, "batch.y")


def regression_loss(pred: Tensor, batch: Any) -> Tensor:
    """Mean squared error against ``batch.y`` (node or graph batches; QM9's dipole moment)."""
    _check_targets(pred, batch.y, "batch.y")
    return F.mse_loss(pred.reshape(batch.y.shape), batch.y.to(pred.dtype))


def link_loss(pred: Tensor, batch: Any) -> Tensor:
    """Binary cross-entropy of edge logits ``[B]`` against ``batch.label`` (LinkBatch)."""
    _check_targets(pred, batch.label, "batch.label")
    return F.binary_cross_entropy_with_logits(pred.reshape(-1), batch.label.to(pred.dtype))


def _check_targets(pred: Tensor, target: Any, name: str) -> None:
    """One prediction per target value, and at least one (shapes only: no host sync). Without
    this a wrong count failed in ``view`` ("shape '[3]' is invalid for input of size 6") or,
    for one prediction, broadcast over every target with only a warning; an empty batch gave
    a NaN loss, reported at the epoch's end as a divergence. (NaN targets are left to
    :class:`LossDiverged`, which names the step: reading values would stall CUDA steps.)"""
    if not isinstance(target, Tensor):
        raise ValueError(f"{name} must be a tensor, got {type(target).__name__}")
    if pred.numel() != target.numel():
        raise ValueError(
            f"the task head's output of shape {list(pred.shape)} must hold one prediction per "
            f"value of {name} of shape {list(target.shape)}"
        )
    if target.numel() == 0:
        raise ValueError(f"{name} is empty: a batch of no items has no mean loss")


def rating_cross_entropy(logits: Tensor, batch: Any) -> Tensor:
    """Cross-entropy of ``[B, R]`` rating-level scores against ``batch.level`` (GC-MC)."""
    return _cross_entropy(logits, batch.level, "batch.level")


def _cross_entropy(scores: Tensor, target: Tensor, name: str) -> Tensor:
    """``F.cross_entropy(scores, target)`` for ``[B, C]`` scores and ``[B]`` class ids
    (``name``: where the ids come from, for the error when one lies outside ``[0, C)``).

    ATen's CPU log-softmax over a last dimension shorter than one SIMD vector runs a scalar
    loop per row (MovieLens: C = 5 levels, 8,192 rows, 1.3 ms forward + backward a step). The
    same loss over the transposed scores, ``[1, C, B]`` with a ``[1, B]`` target, takes the
    softmax across rows, vectorised over B: the same mean of the same per-row terms, 4-5x
    faster for C below the vector width, slower above it."""
    target = _class_ids(target, scores, name)
    try:
        if (
            scores.dim() == 2
            and scores.device.type == "cpu"
            and scores.size(1) < _cpu_vector_floats()
            and isinstance(target, Tensor)
            and target.dim() == 1
            and not target.is_floating_point()
        ):
            return F.cross_entropy(scores.t().unsqueeze(0), target.unsqueeze(0))
        return F.cross_entropy(scores, target)
    except IndexError as err:
        # ATen's CPU check of the ids ("Target 5 is out of bounds."), caught rather than
        # checked ahead, which would cost every step (on CUDA, a host sync).
        classes = scores.size(1) if scores.dim() > 1 else scores.size(0)
        raise ValueError(
            f"{name} must hold class ids in [0, {classes}) for scores of {classes} classes: {err}"
        ) from err


def _class_ids(target: Any, scores: Tensor, name: str) -> Any:
    """``target`` as int64 class ids for ``scores`` (int32 ids converted; float targets shaped
    like the scores are class probabilities and pass). Float or bool labels and ``[B, 1]``
    columns are refused with their name: ATen's errors ("expected target dtype to be Long",
    "multi-target not supported") name neither. Dtype and shape only: no host sync."""
    if not isinstance(target, Tensor):
        raise ValueError(f"{name} must be a tensor of class ids, got {type(target).__name__}")
    if scores.dim() > 1 and target.dim() > 0 and target.size(0) != scores.size(0):
        # torch: "Expected target size [1, 4], got [1, 3]" (of the transposed scores)
        raise ValueError(
            f"{name} has {target.size(0)} rows for {scores.size(0)} rows of scores "
            f"{list(scores.shape)}: one target per row"
        )
    if scores.dim() > 1 and scores.size(0) == 0:
        raise ValueError(f"{name} is empty: a batch of no items has no mean loss (NaN)")
    if target.is_floating_point() and target.shape == scores.shape:
        return target
    if not holds_integers(target):
        raise ValueError(
            f"{name} must hold integer class ids for a classification loss, got {target.dtype} "
            "(convert labels with .long(); use regression_loss for real-valued targets)"
        )
    if target.dim() != scores.dim() - 1:
        raise ValueError(
            f"{name} must hold one class id per row of the {list(scores.shape)} scores, got "
            f"shape {list(target.shape)} (a [B, 1] column: .view(-1))"
        )
    return target.long()


def _cpu_vector_floats() -> int:
    """Floats per SIMD vector of ATen's CPU kernels (16 with AVX-512, else 8)."""
    return 16 if "AVX512" in torch.backends.cpu.get_cpu_capability() else 8


def rating_mse(pred: Tensor, batch: Any) -> Tensor:
    """Mean squared error of predicted ratings ``[B]`` against ``batch.rating``."""
    _check_targets(pred, batch.rating, "batch.rating")
    return F.mse_loss(pred.reshape(-1), batch.rating.reshape(-1).to(pred.dtype))
