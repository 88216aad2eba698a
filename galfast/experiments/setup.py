"""The shape of an experimental setup: which datasets it takes, its defaults, how it trains.

A new setup (knowledge graphs, QM9) is a module defining one :class:`Setup` and an entry in
:data:`galfast.experiments.runner.SETUPS`; the runner does the rest (dataset, seeding, audit,
record).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from torch import Tensor

from galfast.experiments.config import ExperimentConfig
from galfast.gal import SensitiveAttribute

__all__ = ["Setup", "TrainFn"]

# train(cfg, dataset, attribute, epochs, progress) -> (frozen embeddings, task metrics)
TrainFn = Callable[
    [ExperimentConfig, Any, SensitiveAttribute, int, bool], tuple[Tensor, dict[str, float]]
]


@dataclass(frozen=True)
class Setup:
    """One of the paper's experimental setups.

    Attributes:
        name: recorded as the run's ``setup``.
        dataset_type: the dataset class this setup trains on.
        epochs, attacker_epochs: the defaults for the run's task and audit epochs.
        attribute: the default sensitive attribute (the dataset's first when it lacks it).
        task_metric: the key of the task metric ``train`` returns.
        train: trains an encoder and measures the task, see :data:`TrainFn`.
    """

    name: str
    dataset_type: type
    epochs: int
    attacker_epochs: int
    attribute: str
    task_metric: str
    train: TrainFn

    def defaults(self) -> dict[str, Any]:
        return {
            "setup": self.name,
            "epochs": self.epochs,
            "attacker_epochs": self.attacker_epochs,
            "attribute": self.attribute,
            "task_metric": self.task_metric,
        }
