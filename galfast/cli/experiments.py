"""One GAL experiment end to end: load a dataset, train an encoder with GALTrainer at one
lambda, measure the task and audit the frozen embeddings. Shared by ``run``, ``sweep``,
``demo`` and ``tsne``.

Two setups, as in the paper's appendix (../shared/paper.md, "Experimental setups"):

- *Planetoid* (Cora, CiteSeer, PubMed, synthetic graphs): link prediction with a dot-product
  decoder and one negative per edge, a 2-layer encoder (128, 64) over the features, or over a
  learned 128-wide node embedding when the dataset has none (PubMed here), Adam 0.01, 150
  full-graph epochs; task = test ROC-AUC; the document class is the sensitive attribute.
- *MovieLens* (real and synthetic): learned 20-wide embedding + BatchNorm + one GNN layer, a
  bilinear decoder with 2 bases over the 5 rating levels (cross-entropy), 25 epochs of 8,192
  ratings per batch, an adversary step on 256 users after every task step; task = test RMSE
  of the expected rating.

Both audit the embeddings with :func:`galfast.audit` (MLP and linear attackers, trained on a
seeded 80% of the nodes with the attribute, scored on the other 20%).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any, Optional, Union

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from torch import Tensor

from galfast.audit import audit
from galfast.cli.encoders import make_encoder
from galfast.datasets import GraphDataset, MissingFeaturesWarning, RatingDataset, load
from galfast.gal.seeding import cuda_rng_devices
from galfast.models import AttackerMLP, BilinearRatingDecoder, DotProductLinkDecoder
from galfast.train import (
    EdgeHead,
    GALTrainer,
    LinkBatches,
    RatingBatches,
    SensitiveAttribute,
    link_loss,
    rating_cross_entropy,
)

__all__ = ["ExperimentConfig", "Outcome", "load_dataset", "run_experiment", "setup_defaults"]

AUDIT_TEST_FRACTION = 0.2


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything that defines one run (one training seed). ``None`` fields take the
    setup's defaults (:func:`setup_defaults`)."""

    dataset: str = "cora"
    root: Optional[str] = None
    encoder: str = "gcn"
    distance: str = "tv"
    lam: float = 0.0
    attribute: Optional[str] = None
    pairing: str = "node"
    epochs: Optional[int] = None
    attacker_epochs: Optional[int] = None
    attacks: tuple[str, ...] = ("node", "neighbor")
    attackers: tuple[str, ...] = ("mlp", "linear")
    audit_seeds: int = 1
    seed: int = 0
    device: str = "cpu"
    adv_every: int = 1
    adv_schedule: str = "after"
    pretrain_epochs: int = 0
    cuda_graphs: bool = False
    dataset_options: tuple[tuple[str, Any], ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["attacks"], out["attackers"] = list(self.attacks), list(self.attackers)
        out["dataset_options"] = dict(self.dataset_options)
        return out


@dataclass
class Outcome:
    """A finished run: its JSON-ready ``record`` and the frozen embeddings with the sensitive
    attribute (for t-SNE and ``--save-embeddings``)."""

    record: dict[str, Any]
    embeddings: Tensor
    attribute: SensitiveAttribute


def setup_defaults(dataset: Union[GraphDataset, RatingDataset]) -> dict[str, Any]:
    """The paper's hyperparameters for the dataset's setup."""
    if isinstance(dataset, RatingDataset):
        return {
            "setup": "movielens",
            "epochs": 25,
            "attacker_epochs": 30,
            "attribute": "gender",
            "task_metric": "rmse",
        }
    return {
        "setup": "planetoid",
        "epochs": 150,
        "attacker_epochs": 80,
        "attribute": "class",
        "task_metric": "auc",
    }


@lru_cache(maxsize=4)
def load_dataset(
    name: str, root: Optional[str], options: tuple[tuple[str, Any], ...] = ()
) -> Union[GraphDataset, RatingDataset]:
    """Loads (once per process) a dataset by name. The data split is fixed (seed 0) so runs
    with different training seeds are scored on the same held-out edges and ratings."""
    kwargs = dict(options)
    if name.startswith("movielens-"):
        # The paper's graph: rated movies only (6,040 + 3,706 nodes for ML-1M).
        kwargs.setdefault("unrated_movies", "drop")
    with warnings.catch_warnings():
        # Structure-only PubMed: the note is kept in dataset.notes and printed by the CLI.
        warnings.simplefilter("ignore", MissingFeaturesWarning)
        return load(name, root=root, seed=0, **kwargs)


def _sensitive(dataset: Union[GraphDataset, RatingDataset], name: str) -> SensitiveAttribute:
    if name not in dataset.attributes:
        raise ValueError(
            f"{dataset.name} has no attribute {name!r}; it has {sorted(dataset.attributes)}"
        )
    classes = len(dataset.attribute_classes[name])
    values = dataset.attributes[name]
    if classes == 2:
        return SensitiveAttribute(name, "binary", values, index=dataset.attribute_nodes)
    return SensitiveAttribute(
        name, "categorical", values, index=dataset.attribute_nodes, num_classes=classes
    )


def _audit_split(nodes: Tensor, seed: int) -> tuple[Tensor, Tensor]:
    gen = torch.Generator().manual_seed(seed)
    perm = nodes[torch.randperm(nodes.numel(), generator=gen)]
    num_test = max(1, int(AUDIT_TEST_FRACTION * nodes.numel()))
    return perm[num_test:], perm[:num_test]


def _link_auc(z: Tensor, pos: Tensor, neg: Tensor) -> float:
    pairs = torch.cat([pos, neg], dim=1).to(z.device)
    scores = (z[pairs[0]] * z[pairs[1]]).sum(-1).cpu().numpy()
    labels = np.concatenate([np.ones(pos.size(1)), np.zeros(neg.size(1))])
    return float(roc_auc_score(labels, scores))


def _trainer_options(cfg: ExperimentConfig) -> dict[str, Any]:
    return {
        "adv_every": cfg.adv_every,
        "adv_schedule": cfg.adv_schedule,
        "pretrain_epochs": cfg.pretrain_epochs,
        "cuda_graphs": cfg.cuda_graphs,
    }


def _train_planetoid(cfg, dataset: GraphDataset, attribute, epochs, progress):
    split = dataset.link_split
    encoder = make_encoder(
        cfg.encoder,
        (128, 64),
        num_features=dataset.num_features,
        num_nodes=dataset.num_nodes,
        embedding_dim=128,
    )
    attacker = AttackerMLP(64, attribute.num_outputs)
    trainer = GALTrainer(
        encoder,
        EdgeHead(DotProductLinkDecoder()),
        attacker,
        task_loss=link_loss,
        distance=cfg.distance,
        lam=cfg.lam,
        pairing=cfg.pairing,
        seed=cfg.seed,
        device=cfg.device,
        **_trainer_options(cfg),
    )
    batches = LinkBatches(split.train_pos, dataset.num_nodes, batch_size=None, negatives=1)
    trainer.fit(split.graph, batches, attribute, epochs, x=dataset.x, progress=progress)
    z = trainer.embed()
    return z, {"auc": _link_auc(z, split.test_pos, split.test_neg)}


def _train_movielens(cfg, dataset: RatingDataset, attribute, epochs, progress):
    encoder = make_encoder(
        cfg.encoder, (20,), num_features=0, num_nodes=dataset.num_nodes, embedding_dim=20
    )
    decoder = BilinearRatingDecoder(20, dataset.num_rating_levels, num_bases=2)
    trainer = GALTrainer(
        encoder,
        EdgeHead(decoder),
        AttackerMLP(20, attribute.num_outputs),
        task_loss=rating_cross_entropy,
        distance=cfg.distance,
        lam=cfg.lam,
        pairing=cfg.pairing,
        adv_batch_size=256,
        seed=cfg.seed,
        device=cfg.device,
        **_trainer_options(cfg),
    )
    train = dataset.train_ratings
    levels = range(1, dataset.num_rating_levels + 1)
    batches = RatingBatches(train[:, :2].t(), train[:, 2], levels=levels, batch_size=8192)
    trainer.fit(dataset.graph, batches, attribute, epochs, progress=progress)
    z = trainer.embed()
    test = dataset.test_ratings.to(z.device)
    with torch.no_grad():
        decoder.eval()
        predicted = decoder.expected_rating(decoder(z[test[:, 0]], z[test[:, 1]]))
    rmse = float(torch.sqrt(((predicted - test[:, 2].to(predicted.dtype)) ** 2).mean()))
    return z, {"rmse": rmse}


def run_experiment(cfg: ExperimentConfig, progress: bool = True) -> Outcome:
    """Trains one encoder at ``cfg.lam`` and audits it.

    Returns an :class:`Outcome` whose ``record`` holds the config, the resolved
    hyperparameters, ``task`` (``{"auc": ...}`` or ``{"rmse": ...}``), ``attack`` (per audit
    attack, the strongest family's mean metrics), the full audit report and the seconds spent.
    """
    started = time.perf_counter()
    dataset = load_dataset(cfg.dataset, cfg.root, cfg.dataset_options)
    defaults = setup_defaults(dataset)
    default_attribute = defaults["attribute"]
    if default_attribute not in dataset.attributes:
        default_attribute = next(iter(dataset.attributes))
    attribute = _sensitive(dataset, cfg.attribute or default_attribute)
    epochs = defaults["epochs"] if cfg.epochs is None else cfg.epochs
    attacker_epochs = (
        defaults["attacker_epochs"] if cfg.attacker_epochs is None else cfg.attacker_epochs
    )
    train = _train_movielens if defaults["setup"] == "movielens" else _train_planetoid
    # The modules' initial weights come from torch's global generator: seed it with the run's
    # seed (and restore the caller's state after), so a run does not depend on what ran before
    # it in the same process (a sweep).
    with torch.random.fork_rng(devices=cuda_rng_devices(cfg.device)):
        torch.manual_seed(cfg.seed)
        z, task = train(cfg, dataset, attribute, epochs, progress)
    train_idx, test_idx = _audit_split(dataset.attribute_nodes, cfg.seed)
    report = audit(
        z,
        attribute,
        train_idx=train_idx,
        test_idx=test_idx,
        graph=dataset.graph,
        attacks=cfg.attacks,
        attackers=cfg.attackers,
        seeds=cfg.audit_seeds,
        epochs=attacker_epochs,
        seed=cfg.seed,
        progress=progress,
    )
    attack = {
        r.attack: {"attacker": r.attacker, **{k: m.mean for k, m in r.metrics.items()}}
        for r in report.headline()
    }
    baseline = {r.attack: r.baseline for r in report.headline()}
    record = {
        "config": cfg.to_dict(),
        "setup": defaults["setup"],
        "attribute": attribute.name,
        "epochs": epochs,
        "attacker_epochs": attacker_epochs,
        "task_metric": defaults["task_metric"],
        "task": task,
        "attack": attack,
        "baseline": baseline,
        "audit": report.to_dict(),
        "notes": list(dataset.notes),
        "seconds": time.perf_counter() - started,
    }
    return Outcome(record, z.cpu(), attribute)
