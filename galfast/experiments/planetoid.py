"""The Planetoid setup (Cora, CiteSeer, PubMed, synthetic graphs): link prediction.

A dot-product decoder with one negative per edge, a 2-layer encoder (128, 64) over the
features, or over a learned 128-wide node embedding when the dataset has none (PubMed here),
Adam 0.01, 150 full-graph epochs; task = test ROC-AUC; the document class is the sensitive
attribute.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from galfast._dtypes import holds_integers
from galfast.datasets import GraphDataset
from galfast.experiments.config import ExperimentConfig
from galfast.experiments.encoders import make_encoder
from galfast.experiments.setup import Setup, attacker_for
from galfast.gal import SensitiveAttribute
from galfast.models import DotProductLinkDecoder
from galfast.train import EdgeHead, GALTrainer, LinkBatches, link_loss

__all__ = ["PLANETOID", "link_auc"]


def link_auc(z: Tensor, pos: Tensor, neg: Tensor) -> float:
    """ROC-AUC of dot-product scores separating the ``pos`` edges from the ``neg`` ones (each
    ``[2, E]`` node ids into the rows of ``z``, ``E >= 1``); NaN when a score is not finite (a
    diverged encoder, which the runner reports)."""
    from sklearn.metrics import roc_auc_score  # scikit-learn loads only when it is needed

    pos, neg = (_node_pairs(name, e, z.size(0)) for name, e in (("pos", pos), ("neg", neg)))
    pairs = torch.cat([pos, neg], dim=1).to(z.device)
    # In float64: the products of large but finite float32 embeddings stay finite.
    scores = (z[pairs[0]].double() * z[pairs[1]].double()).sum(-1).cpu().numpy()
    if not np.isfinite(scores).all():
        return float("nan")
    labels = np.concatenate([np.ones(pos.size(1)), np.zeros(neg.size(1))])
    return float(roc_auc_score(labels, scores))


def _node_pairs(name: str, pairs: Tensor, num_nodes: int) -> Tensor:
    """``pairs`` as int64 ``[2, E]`` ids of ``num_nodes`` nodes. Unchecked, ``[E, 2]`` pairs
    were scored column by column, a negative id read a row from the end and uint8 ids
    indexed as a mask: an AUC of other pairs, without an error."""
    if not (isinstance(pairs, Tensor) and pairs.dim() == 2 and pairs.size(0) == 2):
        shape = list(pairs.shape) if isinstance(pairs, Tensor) else type(pairs).__name__
        raise ValueError(f"{name} must be a [2, E] tensor of node pairs, got {shape}")
    if not holds_integers(pairs) or pairs.size(1) == 0:
        raise ValueError(f"{name} must hold at least one pair of integer node ids")
    pairs = pairs.long()
    low, high = (int(v) for v in torch.aminmax(pairs))
    if low < 0 or high >= num_nodes:
        bad = low if low < 0 else high
        raise ValueError(f"{name} holds node {bad}, outside the {num_nodes} rows of z")
    return pairs


def train(
    cfg: ExperimentConfig,
    dataset: GraphDataset,
    attributes: tuple[SensitiveAttribute, ...],
    epochs: int,
    progress: bool,
) -> tuple[Tensor, dict[str, float]]:
    split = dataset.link_split
    encoder = make_encoder(
        cfg.encoder,
        (128, 64),
        num_features=dataset.num_features,
        num_nodes=dataset.num_nodes,
        embedding_dim=128,
    )
    trainer = GALTrainer.from_config(
        encoder,
        EdgeHead(DotProductLinkDecoder()),
        attacker_for(attributes, 64),
        task_loss=link_loss,
        config=cfg.gal_config(),
        device=cfg.device,
        # whole-graph steps
        cuda_graphs=cfg.cuda_graphs_for(by_default=True),
    )
    batches = LinkBatches(split.train_pos, dataset.num_nodes, batch_size=None, negatives=1)
    trainer.fit(split.graph, batches, attributes, epochs, x=dataset.x, progress=progress)
    z = trainer.embed()
    return z, {"auc": link_auc(z, split.test_pos, split.test_neg)}


def _check_link_split(dataset: GraphDataset) -> None:
    """Training needs an edge, the test AUC at least one test edge and one test non-edge."""
    split = dataset.link_split
    train, pos, neg = split.train_pos.size(1), split.test_pos.size(1), split.test_neg.size(1)
    if not (train and pos and neg):
        raise ValueError(
            f"the {dataset.name} link split holds {train} training edge(s), {pos} test edge(s) "
            f"and {neg} test non-edge(s): training needs an edge and the test AUC at least one "
            "test edge and one non-edge; raise test_fraction, or use a larger or denser graph"
        )


PLANETOID = Setup(
    name="planetoid",
    dataset_type=GraphDataset,
    epochs=150,
    attacker_epochs=80,
    attribute="class",
    task_metric="auc",
    train=train,
    check_data=_check_link_split,
    steps_per_epoch=lambda dataset: 1,  # whole-graph steps
)
