"""One GAL experiment end to end: load a dataset, train an encoder with GALTrainer at one
lambda in the dataset's setup, measure the task and audit the frozen embeddings with
:func:`galfast.audit` (MLP and linear attackers, trained on a seeded 80% of the nodes with
the attribute, scored on the other 20%)."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Optional, Union

import torch

from galfast._dtypes import all_finite
from galfast.audit import audit, audit_split
from galfast.audit.classic import SKLEARN_MODULES
from galfast.audit.forked_workers import start_standby
from galfast.audit.jobs import default_workers
from galfast.datasets import (
    GraphDataset,
    KnowledgeGraphDataset,
    MissingFeaturesWarning,
    RatingDataset,
    load,
)
from galfast.datasets.molecule_dataset import MoleculeDataset
from galfast.experiments.config import ConfigError, ExperimentConfig, Outcome
from galfast.experiments.kg_sensitive import kg_sensitive_attribute
from galfast.experiments.knowledge_graph import KNOWLEDGE_GRAPH
from galfast.experiments.movielens import MOVIELENS
from galfast.experiments.planetoid import PLANETOID
from galfast.experiments.qm9 import QM9
from galfast.experiments.setup import Setup
from galfast.gal import SensitiveAttribute, cuda_rng_devices
from galfast.train import LossDiverged

__all__ = [
    "SETUPS",
    "Prepared",
    "TrainingDiverged",
    "check_defence",
    "load_dataset",
    "prepare",
    "run_experiment",
    "sensitive_attribute",
    "setup_defaults",
    "setup_for",
]

# The audit attacks an ExperimentConfig names by default.
_DEFAULT_ATTACKS = ExperimentConfig.__dataclass_fields__["attacks"].default

# Tried in order: the first whose dataset type matches runs the experiment.
SETUPS: tuple[Setup, ...] = (MOVIELENS, PLANETOID, KNOWLEDGE_GRAPH, QM9)


def setup_for(dataset: Union[GraphDataset, RatingDataset]) -> Setup:
    """The setup that trains on ``dataset``."""
    for setup in SETUPS:
        if isinstance(dataset, setup.dataset_type):
            return setup
    raise ValueError(f"no experimental setup trains on a {type(dataset).__name__}")


def setup_defaults(dataset: Union[GraphDataset, RatingDataset]) -> dict[str, Any]:
    """The paper's hyperparameters for the dataset's setup."""
    return setup_for(dataset).defaults()


def load_dataset(
    name: str,
    root: Optional[str],
    options: Union[tuple[tuple[str, Any], ...], Mapping[str, Any]] = (),
) -> Union[GraphDataset, RatingDataset]:
    """Loads (once per process) a dataset by name. The data split is fixed (seed 0) so runs
    with different training seeds are scored on the same held-out edges and ratings.
    ``options``: the loader's keyword arguments, as (key, value) pairs or a dict."""
    if isinstance(options, Mapping):  # the cache hashes its arguments: a dict would fail there
        options = tuple(options.items())
    try:
        hash((name, root, options))
    except TypeError:
        raise ValueError(
            f"load_dataset: options must be (key, value) pairs of plain values or a dict, "
            f"and name and root plain values; got {options!r}"
        ) from None
    # Keyword arguments have no order: one cached load whatever order the options come in.
    if isinstance(options, tuple) and all(
        isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str) for pair in options
    ):
        options = tuple(sorted(options, key=lambda pair: pair[0]))
    return _load_dataset(name, root, options)


@lru_cache(maxsize=4)
def _load_dataset(
    name: str, root: Optional[str], options: tuple[tuple[str, Any], ...]
) -> Union[GraphDataset, RatingDataset]:
    kwargs = dict(options)
    if name.startswith("movielens-"):
        # The paper's graph: rated movies only (6,040 + 3,706 nodes for ML-1M).
        kwargs.setdefault("unrated_movies", "drop")
    with warnings.catch_warnings():
        # Structure-only PubMed: the note is kept in dataset.notes and printed by the CLI.
        warnings.simplefilter("ignore", MissingFeaturesWarning)
        return load(name, root=root, seed=0, **kwargs)


def sensitive_attribute(
    dataset: Union[GraphDataset, RatingDataset], name: str
) -> SensitiveAttribute:
    """The dataset's attribute ``name`` as a binary or categorical sensitive attribute (a
    knowledge graph's: categorical or multilabel, see :func:`kg_sensitive_attribute`; a
    continuous one, known for every molecule, for a :class:`MoleculeDataset`)."""
    if isinstance(dataset, KnowledgeGraphDataset):
        return kg_sensitive_attribute(dataset, name)
    if name not in dataset.attributes:
        raise ValueError(
            f"{dataset.name} has no attribute {name!r}; it has {sorted(dataset.attributes)}"
        )
    if isinstance(dataset, MoleculeDataset):
        return SensitiveAttribute(name, "continuous", dataset.attributes[name])
    classes = len(dataset.attribute_classes[name])
    values = dataset.attributes[name]
    if classes == 2:
        return SensitiveAttribute(name, "binary", values, index=dataset.attribute_nodes)
    return SensitiveAttribute(
        name, "categorical", values, index=dataset.attribute_nodes, num_classes=classes
    )


class TrainingDiverged(ArithmeticError):
    """Training at ``lam`` gave a non-finite loss, embeddings or task metric: the adversary's
    weight (or the task) drove the encoder past the range of floats. ``lam`` is the run's."""

    def __init__(self, lam: float, what: str) -> None:
        super().__init__(f"training diverged at lambda={lam:g} ({what})")
        self.lam = lam


@dataclass(frozen=True)
class Prepared:
    """What a run needs before it trains: the dataset, its setup, the sensitive attributes to
    hide (the first is the run's primary one) and the resolved epochs (``pretrain_epochs``:
    the task-only ones among them)."""

    dataset: Union[GraphDataset, RatingDataset]
    setup: Setup
    attributes: tuple[SensitiveAttribute, ...]
    epochs: int
    attacker_epochs: int
    pretrain_epochs: int = 0
    # The audit attacks the setup admits among those the config names (empty: all of them).
    attacks: tuple[str, ...] = ()

    @property
    def attribute(self) -> SensitiveAttribute:
        return self.attributes[0]


def prepare(cfg: ExperimentConfig) -> Prepared:
    """Loads the dataset and resolves the settings of ``cfg`` without training, so everything
    that can be wrong with the inputs fails here, before any work.

    Raises:
        DatasetNotFoundError: the dataset is neither on disk nor downloadable.
        ConfigError: the dataset lacks an attribute ``cfg.attribute`` names (or has none),
            or its split leaves nothing to train on or to score (an empty test split), or
            ``cfg.device`` names a CUDA device this machine lacks.
        ValueError, OSError: a dataset file is malformed or unreadable, or a loader option
            has a bad value (the message says which).
    """
    _check_device_present(cfg.device)
    dataset = load_dataset(cfg.dataset, cfg.root, cfg.dataset_options)
    setup = setup_for(dataset)
    if setup.check_data is not None:
        try:
            setup.check_data(dataset)
        except ValueError as error:
            raise ConfigError("dataset_options", str(error)) from None
    names = cfg.attribute_names or (_default_attribute(dataset, setup),)
    try:
        attributes = tuple(sensitive_attribute(dataset, name) for name in names)
    except ValueError as error:
        raise ConfigError("attribute", str(error)) from None
    epochs = setup.epochs if cfg.epochs is None else cfg.epochs
    attacker_epochs = setup.attacker_epochs if cfg.attacker_epochs is None else cfg.attacker_epochs
    pretrain = setup.pretrain_epochs if cfg.pretrain_epochs is None else cfg.pretrain_epochs
    attacks = _admitted_attacks(cfg, setup)
    return Prepared(
        dataset,
        setup,
        attributes,
        epochs,
        attacker_epochs,
        pretrain_epochs=pretrain,
        attacks=attacks,
    )


def _check_device_present(device: str) -> None:
    """Raises ConfigError when ``device`` (as ExperimentConfig stores it) is a CUDA device
    this machine lacks: torch would fail only once the run starts (an AssertionError from
    deep inside torch.cuda when it has no CUDA, after the dataset has loaded)."""
    if device == "cpu":
        return
    if not torch.cuda.is_available():
        raise ConfigError("device", f"device {device!r}: no CUDA device is available")
    index, count = torch.device(device).index, torch.cuda.device_count()
    if index is not None and index >= count:
        raise ConfigError(
            "device", f"device {device!r}: the CUDA devices are cuda:0..cuda:{count - 1}"
        )


def _default_attribute(dataset: Any, setup: Setup) -> str:
    """The setup's sensitive attribute, else the dataset's first."""
    if setup.attribute in dataset.attributes:
        return setup.attribute
    if not dataset.attributes:  # next(iter(...)) raised a bare StopIteration
        raise ConfigError("dataset", f"{dataset.name} has no attribute to hide from the adversary")
    return next(iter(dataset.attributes))


def check_defence(cfg: ExperimentConfig, prepared: Prepared) -> None:
    """Raises ConfigError when ``cfg`` asks for a defence (lambda > 0) that its schedule never
    trains: no adversary step after the task-only epochs. :func:`run_experiment` runs such a
    config (a test of the schedule may); a front end that reports the run at its lambda
    refuses it."""
    if cfg.lam == 0:
        return
    epochs, pretrain = prepared.epochs, prepared.pretrain_epochs
    if pretrain >= epochs:
        raise ConfigError(
            "pretrain_epochs",
            f"pretrain_epochs={pretrain} leaves no adversarial epoch of epochs={epochs}, so "
            f"lambda={cfg.lam:g} would train no defence; pre-train for fewer epochs than that",
        )
    if prepared.setup.steps_per_epoch is None:
        return
    # The trainer counts steps from the start, pre-training included: the k-th step (from 1)
    # is an adversary step when k is a multiple of adv_every and its epoch is adversarial.
    per_epoch = prepared.setup.steps_per_epoch(prepared.dataset)
    first, last = pretrain * per_epoch + 1, epochs * per_epoch
    if last // cfg.adv_every * cfg.adv_every < first:
        raise ConfigError(
            "adv_every",
            f"adv_every={cfg.adv_every}: the adversarial epochs hold steps {first}-{last} "
            f"({per_epoch} per epoch), none a multiple of it, so lambda={cfg.lam:g} would "
            "train no defence; lower adv_every or raise epochs",
        )


def _admitted_attacks(cfg: ExperimentConfig, setup: Setup) -> tuple[str, ...]:
    """``cfg.attacks`` less those the setup's embeddings do not admit when ``cfg`` keeps the
    default attacks; a training pairing or attacks asked for that do not apply are refused."""
    if setup.attacks is None:
        return tuple(cfg.attacks)
    if cfg.pairing not in setup.attacks:
        raise ConfigError(
            "pairing",
            f"the {setup.name} setup embeds whole graphs, which no graph links: its adversary "
            f"reads {' or '.join(setup.attacks)}, not {cfg.pairing}",
        )
    refused = [a for a in cfg.attacks if a not in setup.attacks]
    if refused and tuple(cfg.attacks) != _DEFAULT_ATTACKS:
        raise ConfigError(
            "attacks",
            f"the {setup.name} setup embeds whole graphs, which no graph links: only the "
            f"{', '.join(setup.attacks)} attack applies, not {', '.join(refused)}",
        )
    return tuple(a for a in cfg.attacks if a in setup.attacks) or setup.attacks


# The audit's intra-op threads per worker (audit()'s default, passed explicitly).
_AUDIT_THREADS = 1
_TWO_LOADERS_FROM = 4  # standby workers


def start_audit_worker(cfg: ExperimentConfig) -> None:
    """Forks now the audit workers of ``cfg``'s run (a strong audit with more than one worker):
    the first imports scikit-learn (about 1.5 s of CPU) while this process loads the dataset on
    one core, and the run's audit adopts them
    (:func:`galfast.audit.forked_workers.start_standby`). A CPU run starts that one (the audit
    forks the others); a GPU run starts all of them, since none may be forked once CUDA has
    started. Call it before the dataset loads and before CUDA starts; elsewhere the import
    would compete with the training for the cores."""
    if cfg.audit_strength == "strong" and default_workers() > 1:
        count = 1 if cfg.device == "cpu" else default_workers()
        # A GPU run leaves the cores idle while it trains: with enough of them two workers
        # load scikit-learn, and the audit's classic fits (its longest chain) share them.
        loaders = 2 if count >= _TWO_LOADERS_FROM else 1
        start_standby(_AUDIT_THREADS, SKLEARN_MODULES, count, loaders)


def run_experiment(cfg: ExperimentConfig, progress: bool = True) -> Outcome:
    """Trains one encoder at ``cfg.lam`` (hiding every attribute ``cfg.attribute`` names, one
    adversary each) and audits it once per attribute.

    Returns an :class:`Outcome` whose ``record`` holds the config, the resolved
    hyperparameters, ``task`` (``{"auc": ...}`` or ``{"rmse": ...}``), the seconds spent and,
    per attribute under ``attributes[name]``, ``attack`` (per audit attack, the strongest
    family's mean metrics), ``baseline`` and the full audit report; the primary (first)
    attribute's are also at the top level (``attribute``, ``attack``, ``baseline``, ``audit``).

    Raises:
        TrainingDiverged: a loss, the embeddings or the task metric became NaN or infinite.
    """
    started = time.perf_counter()
    prepared = prepare(cfg)
    dataset, setup, attributes = prepared.dataset, prepared.setup, prepared.attributes
    epochs, attacker_epochs = prepared.epochs, prepared.attacker_epochs
    # The modules' initial weights come from torch's global generator: seed it with the run's
    # seed (and restore the caller's state after), so a run does not depend on what ran before
    # it in the same process (a sweep).
    with torch.random.fork_rng(devices=cuda_rng_devices(cfg.device)):
        torch.manual_seed(cfg.seed)
        resolved = replace(cfg, pretrain_epochs=prepared.pretrain_epochs)
        try:
            z, task = setup.train(resolved, dataset, attributes, epochs, progress)
        except LossDiverged as error:
            reason = f"{error.loss} not finite at epoch {error.epoch}"
            raise TrainingDiverged(cfg.lam, reason) from error
    _check_converged(cfg, z, task)
    # The attackers are small models: on the CPU, in forked workers, their thousands of small
    # steps beat as many GPU kernel launches, so a GPU run's embeddings are audited there.
    z_audit = z.cpu()
    audits = {
        attribute.name: _audit_one(cfg, prepared, z_audit, attribute, progress)
        for attribute in attributes
    }
    primary = attributes[0].name
    record = {
        "config": cfg.to_dict(),
        "setup": setup.name,
        "attribute": primary,
        "epochs": epochs,
        "attacker_epochs": attacker_epochs,
        "pretrain_epochs": prepared.pretrain_epochs,
        "task_metric": setup.task_metric,
        "task": task,
        **audits[primary],
        "attributes": audits,
        "notes": list(dataset.notes),
        "seconds": time.perf_counter() - started,
    }
    class_names = tuple(getattr(dataset, "attribute_classes", {}).get(primary, ()))
    return Outcome(record, z_audit, attributes[0], class_names)


def _check_converged(cfg: ExperimentConfig, z: torch.Tensor, task: dict[str, float]) -> None:
    """Raises TrainingDiverged for non-finite embeddings or task metrics, which the audit and
    the record could not take (the setups score a non-finite encoder as NaN, not an error)."""
    if not all_finite(z):
        raise TrainingDiverged(cfg.lam, "non-finite embeddings")
    bad = [name for name, value in task.items() if not math.isfinite(value)]
    if bad:
        raise TrainingDiverged(cfg.lam, f"non-finite test {', '.join(bad)}")


def _audit_one(
    cfg: ExperimentConfig,
    prepared: Prepared,
    z: torch.Tensor,
    attribute: SensitiveAttribute,
    progress: bool,
) -> dict[str, Any]:
    """The audit of one attribute as the record stores it: ``attack``, ``baseline``, ``audit``."""
    dataset, setup = prepared.dataset, prepared.setup
    if setup.audit_split is not None:
        train_idx, test_idx = setup.audit_split(dataset, cfg.seed)
    else:
        nodes = dataset.attribute_nodes
        if isinstance(nodes, dict):  # a knowledge graph: each attribute known on its own entities
            nodes = nodes[attribute.name]
        train_idx, test_idx = audit_split(nodes, cfg.seed)
    report = audit(
        z,
        attribute,
        train_idx=train_idx,
        test_idx=test_idx,
        graph=getattr(dataset, "graph", None),
        attacks=prepared.attacks or cfg.attacks,
        attackers=cfg.attackers,
        seeds=cfg.audit_seeds,
        epochs=prepared.attacker_epochs,
        seed=cfg.seed,
        progress=progress,
        strength=cfg.audit_strength,
        threads=_AUDIT_THREADS,
    )
    attack = {
        r.attack: {"attacker": r.attacker, **{k: m.mean for k, m in r.metrics.items()}}
        for r in report.headline()
    }
    baseline = {r.attack: r.baseline for r in report.headline()}
    return {"attack": attack, "baseline": baseline, "audit": report.to_dict()}
