"""Splitting ``range(n)`` into (optionally shuffled) mini-batches of indices."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

import torch
from torch import Tensor

from galfast._args import check_flag, check_int

__all__ = ["check_batch_size", "index_batches"]


def check_batch_size(batch_size: Optional[int]) -> Optional[int]:
    """``batch_size`` as an int (NumPy's too) or None; ValueError unless it is positive."""
    return None if batch_size is None else check_int("batch_size", batch_size, 1)


def index_batches(
    n: int,
    batch_size: Optional[int],
    shuffle: bool,
    generator: Optional[torch.Generator] = None,
    device: Optional[torch.device] = None,
) -> Iterator[Tensor]:
    """Yields int64 index tensors covering ``range(n)`` in chunks of ``batch_size`` (all at once
    when None), on ``device`` (default: the CPU). Shuffling draws from `generator`, by default
    torch's global generator, which :class:`GALTrainer` seeds at the start of every epoch, so
    epochs are reproducible and resumable, and the same on every device: the order is drawn
    on the CPU and copied once per epoch (a copy per batch from pageable memory made the host
    wait for the GPU's queued work at every step)."""
    # again: a batch_size or shuffle set on the batches after they were built
    batch_size, shuffle = check_batch_size(batch_size), check_flag("shuffle", shuffle)
    order = torch.randperm(n, generator=generator) if shuffle else torch.arange(n)
    if device is not None:
        order = order.to(device)
    size = n if batch_size is None else batch_size
    for start in range(0, n, max(size, 1)):
        yield order[start : start + size]
