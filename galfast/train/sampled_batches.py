"""Task batches on a sampled computation graph: which nodes a batch reads, the batch with those
ids replaced by rows of the batch's own embeddings, and one process's share of a batch."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor

from galfast._dtypes import holds_integers

__all__ = ["NODE_FIELDS", "batch_length", "batch_nodes", "localised", "shard"]

# Fields of the ready-made batches (NodeBatch; LinkBatch, RatingBatch) that hold node ids the
# task head indexes the embeddings with.
NODE_FIELDS = ("nodes", "src", "dst")


def _node_fields(batch: Any) -> list[str]:
    fields = (
        [f.name for f in dataclasses.fields(batch) if f.name in NODE_FIELDS]
        if dataclasses.is_dataclass(batch) and not isinstance(batch, type)
        else []
    )
    if not fields:
        raise ValueError(
            f"sampled training needs batches that are dataclasses with node-id fields "
            f"{NODE_FIELDS} (NodeBatch, LinkBatch, RatingBatch); got {type(batch).__name__}"
        )
    for name in fields:  # dtype and shape only: no host sync
        ids, where = getattr(batch, name), f"{type(batch).__name__}.{name}"
        if not isinstance(ids, Tensor):  # a list or None failed on .reshape / .size
            raise ValueError(f"{where} must be a tensor of node ids, got {type(ids).__name__}")
        if not holds_integers(ids):  # a bool mask or float ids
            raise ValueError(f"{where} must hold integer node ids, got {ids.dtype}")
        if ids.dim() == 0:
            raise ValueError(f"{where} must have one row per item, got a 0-d tensor")
    return fields


def batch_nodes(batch: Any) -> Tensor:
    """The node ids ``batch`` reads, its node fields concatenated in field order (as int64:
    the sampler takes int64 or int32 seeds only)."""
    return torch.cat([getattr(batch, name).reshape(-1).long() for name in _node_fields(batch)])


def localised(batch: Any, rows: Tensor) -> Any:
    """``batch`` with its node fields replaced by ``rows``, the rows of the batch's own
    embeddings, in the order :func:`batch_nodes` listed them."""
    changes, start = {}, 0
    for name in _node_fields(batch):
        ids = getattr(batch, name)
        changes[name] = rows[start : start + ids.numel()].view(ids.shape)
        start += ids.numel()
    return dataclasses.replace(batch, **changes)


def batch_length(batch: Any) -> int:
    """Items in ``batch`` (rows of its node fields), at least one. The trainer asks this of
    whole batches only (one process's share may be empty): an empty batch encoded nothing and
    was recorded as a task loss of 0, where the full-graph losses refuse it."""
    name = _node_fields(batch)[0]
    length = getattr(batch, name).size(0)
    if length == 0:
        raise ValueError(
            f"{type(batch).__name__}.{name} holds no node ids: a batch of no items has no task "
            "loss (drop empty batches)"
        )
    return length


def shard(batch: Any, start: int, stop: int) -> Any:
    """Items ``start:stop`` of ``batch``: every tensor field with one row per item sliced."""
    length = batch_length(batch)
    changes = {
        f.name: getattr(batch, f.name)[start:stop]
        for f in dataclasses.fields(batch)
        if isinstance(getattr(batch, f.name), Tensor)
        and getattr(batch, f.name).dim() > 0
        and getattr(batch, f.name).size(0) == length
    }
    return dataclasses.replace(batch, **changes)
