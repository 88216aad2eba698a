"""The shape of an experimental setup: which datasets it takes, its defaults, how it trains.

A new setup (knowledge graphs, QM9) is a module defining one :class:`Setup` and an entry in
:data:`galfast.experiments.runner.SETUPS`; the runner does the rest (dataset, seeding, audit,
record).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

from torch import Tensor

from galfast.experiments.config import ExperimentConfig
from galfast.gal import SensitiveAttribute
from galfast.models import AttackerMLP

__all__ = ["Setup", "TrainFn", "attacker_for"]

# train(cfg, dataset, attributes, epochs, progress) -> (frozen embeddings, task metrics); the
# attributes are those to hide, one adversary each (see attacker_for).
TrainFn = Callable[
    [ExperimentConfig, Any, tuple[SensitiveAttribute, ...], int, bool],
    tuple[Tensor, dict[str, float]],
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
        pretrain_epochs: the default task-only epochs before the adversary starts (counted in
            ``epochs``; the knowledge-graph setup's 35).
        attacks: the audit attacks its embeddings admit (None: any). Whole-graph embeddings
            (QM9's molecules) have no graph linking them: only ``("node",)``.
        audit_split: ``(dataset, seed) -> (train_idx, test_idx)``, the rows the audit's
            attackers train on and are scored on (None: a seeded 80/20 split of the rows
            where the attribute is known).
        check_data: ``(dataset) -> None``, raises ValueError when the dataset's split leaves
            nothing to train on or to score (None: no check).
        steps_per_epoch: ``(dataset) -> int``, the task steps of one epoch, which the
            adversary schedule counts (None: not known before training, not checked).
    """

    name: str
    dataset_type: type
    epochs: int
    attacker_epochs: int
    attribute: str
    task_metric: str
    train: TrainFn
    pretrain_epochs: int = 0
    attacks: Optional[tuple[str, ...]] = None
    audit_split: Optional[Callable[[Any, int], tuple[Tensor, Tensor]]] = None
    check_data: Optional[Callable[[Any], None]] = None
    steps_per_epoch: Optional[Callable[[Any], int]] = None

    def defaults(self) -> dict[str, Any]:
        return {
            "setup": self.name,
            "epochs": self.epochs,
            "attacker_epochs": self.attacker_epochs,
            "attribute": self.attribute,
            "task_metric": self.task_metric,
            "pretrain_epochs": self.pretrain_epochs,
        }


def attacker_for(
    attributes: tuple[SensitiveAttribute, ...], embedding_dim: int
) -> Union[AttackerMLP, dict[str, AttackerMLP]]:
    """The simulated adversary GALTrainer takes: one MLP for one attribute, else one per
    attribute by name (built in the attributes' order, so the first draws the same initial
    weights as a single-attribute run)."""
    attackers = {a.name: AttackerMLP(embedding_dim, a.num_outputs) for a in attributes}
    return attackers[attributes[0].name] if len(attackers) == 1 else attackers
