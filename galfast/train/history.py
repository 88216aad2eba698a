"""Per-epoch training records."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional

__all__ = ["History"]


class History:
    """A list of per-epoch records (dicts of metric name -> number).

    Keys written by :class:`GALTrainer`: ``epoch`` (1-based), ``phase`` (``"pretrain"`` or
    ``"adversarial"``), ``task_loss`` (mean over the epoch's task steps), ``task_steps``,
    ``adv_steps``, and per sensitive attribute ``adv_loss/<name>`` (mean adversary loss; for
    the Wasserstein distance this is minus the critic's gap), ``pairs/<name>`` (pairs the
    adversary trained on) and ``pair_failures/<name>`` (walks that failed and were dropped),
    plus ``seconds``. Callbacks may add more (e.g. ``val_auc``).

    Example:
        >>> h = History([{"epoch": 1, "task_loss": 0.7}, {"epoch": 2, "task_loss": 0.5}])
        >>> h.column("task_loss")
        [0.7, 0.5]
    """

    def __init__(self, records: Optional[list[dict[str, Any]]] = None) -> None:
        self.records: list[dict[str, Any]] = [dict(r) for r in records or []]

    def append(self, record: dict[str, Any]) -> None:
        """Stores ``record`` itself, so callbacks may still add metrics to it."""
        self.records.append(record)

    def column(self, key: str) -> list[Any]:
        """The values of ``key`` per epoch (None where an epoch lacks it)."""
        return [r.get(key) for r in self.records]

    @property
    def last(self) -> dict[str, Any]:
        if not self.records:
            raise ValueError("the history is empty: no epoch has run yet")
        return self.records[-1]

    def to_list(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self.records]

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.records[i]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.records)

    def __repr__(self) -> str:
        return f"History({len(self)} epochs, keys={sorted({k for r in self for k in r})})"
