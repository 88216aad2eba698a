"""What a fit leaves behind and what runs after each epoch: the per-epoch :class:`History`, and
the callbacks (periodic evaluation, early stopping, checkpoints)."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from galfast.train.checkpoints import prepare_checkpoint_path
from galfast.train.config import check_number

if TYPE_CHECKING:
    from galfast.train.trainer import GALTrainer

__all__ = ["Callback", "CheckpointEvery", "EarlyStopping", "EvaluateEvery", "History"]


class History:
    """A list of per-epoch records (dicts of metric name -> number).

    Keys written by :class:`GALTrainer`: ``epoch`` (1-based), ``phase`` (``"pretrain"``,
    ``"adversarial"``, or ``"task"`` for the epochs after pre-training when ``lam == 0``),
    ``task_loss`` (mean over the epoch's task steps), ``task_steps``, ``adv_steps``, and per
    sensitive attribute ``adv_loss/<name>`` (mean adversary loss; for the Wasserstein distance
    this is minus the critic's gap), ``pairs/<name>`` (pairs the adversary trained on) and
    ``pair_failures/<name>`` (walks that failed and were dropped), plus ``seconds``. Callbacks
    may add more (e.g. ``val_auc``).

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


class Callback:
    """Base class. ``on_fit_start`` runs when :meth:`GALTrainer.fit` starts (also after a
    resume, with the restored history); ``on_epoch_end`` runs after every epoch with that
    epoch's record ``logs`` (mutable: add metrics to it). Set ``trainer.stop_training = True``
    to end the fit after the current epoch. With several processes the callbacks may differ
    between them; one that sets ``stop_training`` stops every process, and one that raises
    on one process makes the others raise ``PeerFailed`` there instead of waiting for it."""

    def on_fit_start(self, trainer: GALTrainer) -> None:
        """Called once per ``fit`` before the first epoch."""

    def on_epoch_end(self, trainer: GALTrainer, logs: dict[str, Any]) -> None:
        """Called after each epoch."""


class EvaluateEvery(Callback):
    """Calls ``evaluate(trainer) -> {name: value}`` every ``every`` epochs (epoch numbers
    divisible by ``every``) and adds the values to that epoch's record.

    Example:
        >>> EvaluateEvery(lambda t: {"val_rmse": my_rmse(t.embed())}, every=5)  # doctest: +SKIP
    """

    def __init__(self, evaluate: Callable[[GALTrainer], Mapping[str, float]], every: int = 1):
        if not callable(evaluate):
            raise ValueError(f"evaluate must be a callable, got {type(evaluate).__name__}")
        self.evaluate, self.every = evaluate, check_number("every", every, minimum=1, integer=True)

    def on_epoch_end(self, trainer: GALTrainer, logs: dict[str, Any]) -> None:
        if logs["epoch"] % self.every == 0:
            metrics = self._metrics(trainer)
            # The trainer's own fields (epoch, phase, task_loss, ...) and an earlier callback's
            # metrics: overwritten, the history and every later callback read the wrong value.
            taken = sorted(set(metrics) & set(logs))
            if taken:
                raise ValueError(
                    f"evaluate returned {', '.join(map(repr, taken))}, already in the epoch's "
                    f"record (the trainer's own fields: {', '.join(sorted(logs))}): give the "
                    f"metric another name, e.g. {'val_' + taken[0]!r}"
                )
            logs.update(metrics)

    def _metrics(self, trainer: GALTrainer) -> dict[str, float]:
        metrics = self.evaluate(trainer)
        if not isinstance(metrics, Mapping):
            raise ValueError(
                f"evaluate must return a mapping {{name: number}}, got {type(metrics).__name__}"
            )
        try:
            return {k: float(v) for k, v in metrics.items()}
        except (TypeError, ValueError) as error:
            raise ValueError(f"evaluate must return numbers, got {dict(metrics)!r}") from error


class EarlyStopping(Callback):
    """Stops when ``monitor`` has not improved by more than ``min_delta`` for ``patience``
    consecutive evaluations (epochs whose record lacks ``monitor`` are ignored). Its state is
    rebuilt from the trainer's history at every fit start, so it survives a resume."""

    def __init__(
        self, monitor: str, mode: str = "min", patience: int = 5, min_delta: float = 0.0
    ) -> None:
        if not isinstance(monitor, str):
            raise ValueError(f"monitor must be a metric name (str), got {monitor!r}")
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        patience = check_number("patience", patience, minimum=1, integer=True)
        min_delta = check_number("min_delta", min_delta, minimum=0)
        self.monitor, self.mode, self.patience, self.min_delta = monitor, mode, patience, min_delta
        self.best, self.wait = math.inf, 0

    def _observe(self, value: float) -> None:
        score = value if self.mode == "min" else -value
        if score < self.best - self.min_delta:
            self.best, self.wait = score, 0
        else:
            self.wait += 1

    def on_fit_start(self, trainer: GALTrainer) -> None:
        self.best, self.wait = math.inf, 0
        for value in trainer.history.column(self.monitor):
            if value is not None:
                self._observe(value)

    def on_epoch_end(self, trainer: GALTrainer, logs: dict[str, Any]) -> None:
        if self.monitor in logs:
            self._observe(float(logs[self.monitor]))
        if self.wait >= self.patience:
            trainer.stop_training = True


class CheckpointEvery(Callback):
    """Saves ``trainer.save_checkpoint(path)`` every ``every`` epochs; ``path`` may contain
    ``{epoch}``, e.g. ``"ckpt/epoch{epoch:03d}.pt"``. A path that cannot be formatted, or
    whose folder cannot be made, is refused before the fit's first epoch trains."""

    def __init__(self, path: Union[str, os.PathLike], every: int = 1) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise ValueError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        every = check_number("every", every, minimum=1, integer=True)
        self.path, self.every = os.fspath(path), every
        self._path_at(every)  # a malformed format fails here, not after the first epoch

    def _path_at(self, epoch: int) -> str:
        try:
            return self.path.format(epoch=epoch)
        except (KeyError, IndexError, ValueError, TypeError, AttributeError) as error:
            raise ValueError(
                f"path {self.path!r} is not a format string with {{epoch}} as its only "
                f"field (use {{{{ }}}} for literal braces): {error!r}"
            ) from error

    def on_fit_start(self, trainer: GALTrainer) -> None:
        # A folder that cannot be made fails now, not after the epochs before the first save.
        first_save = (trainer.epoch // self.every + 1) * self.every
        prepare_checkpoint_path(self._path_at(first_save))

    def on_epoch_end(self, trainer: GALTrainer, logs: dict[str, Any]) -> None:
        if logs["epoch"] % self.every == 0:
            trainer.save_checkpoint(self._path_at(logs["epoch"]))
