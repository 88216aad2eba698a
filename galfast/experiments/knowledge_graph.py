"""The knowledge-graph setup (FB15k-237, WN18RR): link prediction with CompGCN-ConvE.

As the paper and GAL's code: a CompGCN encoder (learned 100-wide initial embeddings, one
CompGCNConv layer with circular correlation to 200), the ConvE decoder scoring every entity
for each (entity, relation) query and its inverse, the 1-N loss with label smoothing 0.1,
Adam at 1e-3, batches of 128 queries; 35 task-only epochs, then 120 in which an adversary
step on the batch's entity embeddings follows every task step (155 in all). Task = filtered
MRR (also MR, Hits@1/3/10; ties "realistic") over head and tail prediction on the test split.
Every model setting is a ``model_options`` entry (:mod:`galfast.experiments.kg_options`).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Any, Optional

from torch import Tensor

from galfast._dtypes import all_finite
from galfast.datasets import KnowledgeGraphDataset
from galfast.experiments.config import ExperimentConfig
from galfast.experiments.kg_options import kg_model_options
from galfast.experiments.setup import Setup, attacker_for
from galfast.gal import SensitiveAttribute
from galfast.models import (
    CompGCNEncoder,
    ConvEDecoder,
    DistMultDecoder,
    KGLinkPredictor,
    evaluate_link_prediction,
    kg_queries,
)
from galfast.train import GALTrainer, OneToNBatches, OneToNHead, OneToNLoss

__all__ = ["KNOWLEDGE_GRAPH", "build_kg_model"]


def build_kg_model(dataset: KnowledgeGraphDataset, options: dict[str, Any]) -> KGLinkPredictor:
    """CompGCN with the decoder ``options`` name, sized for `dataset`."""
    encoder = CompGCNEncoder(
        dataset.num_entities,
        dataset.num_relations,
        dataset.train,
        dim=options["dim"],
        init_dim=options["init_dim"],
        hidden_dim=options["hidden_dim"],
        layers=options["layers"],
        composition=options["composition"],
        num_bases=options["num_bases"],
        conv_dropout=options["conv_dropout"],
        hidden_dropout=options["hidden_dropout"],
    )
    if options["decoder"] == "distmult":
        decoder = DistMultDecoder(dataset.num_entities, options["dim"])
    else:
        decoder = ConvEDecoder(
            dataset.num_entities,
            options["dim"],
            k_w=options["k_w"],
            k_h=options["k_h"],
            num_filters=options["num_filters"],
            kernel_size=options["kernel_size"],
            feature_dropout=options["feature_dropout"],
            hidden_dropout=options["decoder_dropout"],
        )
    return KGLinkPredictor(encoder, decoder)


class _FirstBatches:
    """The first `count` batches of each epoch of `batches` (reduced runs)."""

    def __init__(self, batches: OneToNBatches, count: Optional[int]) -> None:
        self.batches, self.count = batches, count

    def __len__(self) -> int:
        return len(self.batches) if self.count is None else min(self.count, len(self.batches))

    def __iter__(self) -> Iterator:
        return islice(iter(self.batches), self.count)


def train(
    cfg: ExperimentConfig,
    dataset: KnowledgeGraphDataset,
    attributes: tuple[SensitiveAttribute, ...],
    epochs: int,
    progress: bool,
) -> tuple[Tensor, dict[str, float]]:
    options = kg_model_options(cfg.model_options)
    model = build_kg_model(dataset, options)
    # The adversary reads the entity embeddings of the batch's queries, a batch as large as the
    # task's (GAL's attribute step runs on the same 128 query entities).
    config = cfg.gal_config(adv_batch_size=options["batch_size"], lr=options["lr"])
    trainer = GALTrainer.from_config(
        model.encoder,
        OneToNHead(model),
        attacker_for(attributes, options["dim"]),
        task_loss=OneToNLoss(options["label_smoothing"]),
        config=config,
        device=cfg.device,
        # opt-in: CompGCN's captured steps are not yet checked on a GPU
        cuda_graphs=cfg.cuda_graphs_for(by_default=False),
    )
    queries = kg_queries(dataset.train, dataset.num_entities, dataset.num_relations)
    batches = OneToNBatches(queries, batch_size=options["batch_size"])
    trainer.fit(
        dataset.graph,
        _FirstBatches(batches, options["max_batches"]),
        attributes,
        epochs,
        progress=progress,
    )
    z = trainer.embed()
    model.eval()
    if not all(all_finite(p) for p in model.parameters()):
        # Diverged (a huge lr): the ranking would refuse the NaN scores with a ValueError;
        # NaN metrics let the runner report TrainingDiverged, as for the other setups.
        return z, {"mrr": float("nan"), "mr": float("nan")}
    known = kg_queries(dataset.all_triples, dataset.num_entities, dataset.num_relations)
    ranking = evaluate_link_prediction(
        model.scorer(), dataset.test.to(z.device), known.to(z.device)
    )
    metrics = ranking.both
    task = {"mrr": metrics.mrr, "mr": metrics.mr}
    task.update({f"hits@{k}": value for k, value in metrics.hits.items()})
    return z, task


def _check_attributes(dataset: KnowledgeGraphDataset) -> None:
    """A run hides and audits a sensitive attribute: without any (``attributes=False``) the
    runner failed on its default attribute with a bare StopIteration."""
    if not dataset.attributes:
        raise ValueError(
            f"{dataset.name} was loaded without its sensitive attributes (attributes=False): "
            "a run needs one to hide and audit; drop the option"
        )


KNOWLEDGE_GRAPH = Setup(
    name="knowledge-graph",
    dataset_type=KnowledgeGraphDataset,
    epochs=155,
    attacker_epochs=30,
    attribute="sense",
    task_metric="mrr",
    train=train,
    pretrain_epochs=35,
    check_data=_check_attributes,
)
