"""The fit's progress bar: epochs done, advanced batch by batch within an epoch, so that a long
epoch (twenty minutes of WN18RR CompGCN on two CPU cores) shows its progress and an estimate
of the time left instead of a bar that stands still until the epoch ends."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Optional

from tqdm.auto import tqdm

__all__ = ["EpochProgress", "batches_per_epoch"]

# The epochs done with two decimals: a fraction of an epoch is progress.
_FORMAT = (
    "{desc}: {percentage:3.0f}%|{bar}| {n:.2f}/{total_fmt} epochs "
    "[{elapsed}<{remaining}, {rate_fmt}{postfix}]"
)


def batches_per_epoch(task_batches: Iterable[Any]) -> Optional[int]:
    """``len(task_batches)`` where the batches say it (a positive int), else None: then the bar
    moves at the end of each epoch only."""
    if not hasattr(type(task_batches), "__len__"):
        return None
    try:
        count = len(task_batches)
    except (TypeError, ValueError, OverflowError):
        # A length that is no count (a DataLoader over an IterableDataset raises TypeError):
        # the bar is no reason to refuse batches that iterate.
        return None
    return count if count > 0 else None


class EpochProgress:
    """A tqdm bar over ``epochs`` epochs, starting at ``done``. :meth:`batch_done` moves it by
    a fraction of an epoch (none past the epoch's end, whatever an iterator's length claimed);
    :meth:`epoch_done` sets it to the whole epochs done and shows the epoch's losses."""

    def __init__(self, epochs: int, done: int, batches: Optional[int], enabled: bool):
        self._batches = batches if enabled else None
        self._in_epoch = 0
        self._bar = tqdm(
            total=epochs,
            initial=min(done, epochs),
            disable=not enabled,
            desc="GAL",
            unit="epoch",
            bar_format=_FORMAT,
            dynamic_ncols=True,
        )

    def batch_done(self) -> None:
        if self._batches is not None and self._in_epoch < self._batches:
            self._in_epoch += 1
            self._bar.update(1 / self._batches)

    def epoch_done(self, epochs_done: int, record: Mapping[str, Any]) -> None:
        self._in_epoch = 0
        self._bar.update(epochs_done - self._bar.n)  # exact: no sum of fractions
        self._bar.set_postfix(
            {k: f"{v:.4g}" for k, v in record.items() if "loss" in k and isinstance(v, float)}
        )

    def close(self) -> None:
        self._bar.close()
