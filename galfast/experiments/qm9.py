"""The QM9 setup: graph-level GAL on molecules, as the reference ``qm9_gal.py`` runs it.

An MPNN (NNConv + GRU + Set2Set, dim 64) on PyG's complete graphs with interatomic distances,
the task the dipole moment mu (target 0) normalised with the training molecules' mean and std,
MSE; Adam 1e-3, 40 epochs of 128 molecules, the task learning rate lowered on a validation
plateau (factor 0.7, patience 5, floor 1e-5) as the reference does. The adversary reads the
Set2Set readout ``[G, 128]`` (the reference's graph embedding, before ``lin1``) through a
gradient reversal and regresses the polarizability alpha (MSE), with GALTrainer's lambda: its
learning rate is ``1e-3 * lambda``. Split: a fixed seeded shuffle, then the first 10,000
molecules test, the next 10,000 validation, the rest training (smaller datasets: a tenth
each). Task metric: test MAE of mu in Debye at the epoch of the best validation MAE; the audit
trains its attackers on the training molecules' frozen readouts and scores them on the test
molecules (attacker MAE in alpha's units, bohr^3).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from galfast.datasets import MoleculeDataset, complete_graph, paper_split, target_statistics
from galfast.experiments.config import ExperimentConfig
from galfast.experiments.setup import Setup
from galfast.gal import SensitiveAttribute
from galfast.models import MPNN, AttackerMLP
from galfast.train import Callback, GALTrainer, GraphBatches, GraphHead, regression_loss

__all__ = ["QM9", "MPNNReadout", "molecule_split"]

DIM = 64
BATCH_SIZE = 128
LEARNING_RATE = 1e-3
# The split is part of the data, not of a run: every seed scores the same test molecules.
SPLIT_SEED = 0


def molecule_split(num_molecules: int) -> tuple[Tensor, Tensor, Tensor]:
    """``(train, val, test)`` indices: a seeded shuffle (seed 0), then 10,000 test and 10,000
    validation molecules (the paper's split; a tenth each, at least one, for datasets under
    100,000 molecules, so fixtures and subsets split too) and the rest for training."""
    if num_molecules < 4:
        # Two training molecules at least: the task's normalisation takes their std.
        raise ValueError(
            "QM9 runs need at least 4 molecules (one test, one validation and two training "
            f"molecules), got {num_molecules}"
        )
    held_out = min(10_000, max(1, num_molecules // 10))
    return paper_split(num_molecules, num_test=held_out, num_val=held_out, seed=SPLIT_SEED)


def _check_split(dataset: MoleculeDataset) -> None:
    """Refuses, before any work, a dataset too small for :func:`molecule_split`."""
    molecule_split(len(dataset))


class MPNNReadout(nn.Module):
    """The encoder GALTrainer trains: ``mpnn``'s message passing and Set2Set readout,
    ``forward(x, graph, batch, edge_attr) -> [G, 2 * dim]`` (a ``GraphBatch``'s call)."""

    def __init__(self, mpnn: MPNN) -> None:
        super().__init__()
        self.mpnn = mpnn

    def forward(self, x: Tensor, graph: Any, batch: Tensor, edge_attr: Tensor) -> Tensor:
        return self.mpnn.readout(x, graph, edge_attr, batch)


def _head(mpnn: MPNN) -> GraphHead:
    """The task head on the readout: ``lin2(ReLU(lin1(.)))``, the MPNN's own layers."""
    return GraphHead(nn.Sequential(mpnn.lin1, nn.ReLU(), mpnn.lin2))


def _batches(dataset: MoleculeDataset, y: Tensor, index: Tensor, shuffle: bool, seed=None):
    return GraphBatches(
        dataset,
        y,
        BATCH_SIZE,
        shuffle,
        index=index,
        seed=seed,
        transform=complete_graph,
    )


@torch.no_grad()
def _readouts(trainer: GALTrainer, batches: GraphBatches) -> Tensor:
    """The encoder's frozen readouts of every molecule in ``batches`` (their order), eval mode."""
    encoder = trainer.encoder
    was_training = encoder.training
    encoder.eval()
    try:
        parts = [batch.to(trainer.device).encode(encoder)[0] for batch in batches]
    finally:
        encoder.train(was_training)
    return torch.cat(parts)


@torch.no_grad()
def _mae(trainer: GALTrainer, batches: GraphBatches, scale: float) -> float:
    """MAE of the task head's predictions over ``batches``, in the target's units."""
    head = trainer.task_head
    was_training = head.training
    head.eval()
    try:
        z = _readouts(trainer, batches)
        pred = head(z, None).view(-1)
    finally:
        head.train(was_training)
    y = batches.y[batches.index].to(pred)
    return float((pred - y.view(-1)).abs().mean()) * scale


class _BestValidation(Callback):
    """The reference's protocol: after every epoch, the validation MAE steers a
    ReduceLROnPlateau on the task optimizer, and the test MAE is taken whenever the
    validation MAE is the best so far."""

    def __init__(self, val: GraphBatches, test: GraphBatches, scale: float) -> None:
        self.val, self.test, self.scale = val, test, scale
        self.best: dict[str, float] = {}

    def on_fit_start(self, trainer: GALTrainer) -> None:
        self.scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
            trainer.task_optimizer, mode="min", factor=0.7, patience=5, min_lr=1e-5
        )

    def on_epoch_end(self, trainer: GALTrainer, logs: dict[str, Any]) -> None:
        val_mae = _mae(trainer, self.val, self.scale)
        self.scheduler.step(val_mae)
        logs["val_mae"] = val_mae
        if not self.best or val_mae <= self.best["val_mae"]:
            self.best = {
                "val_mae": val_mae,
                "mae": _mae(trainer, self.test, self.scale),
                "best_epoch": float(logs["epoch"]),
            }


def train(
    cfg: ExperimentConfig,
    dataset: MoleculeDataset,
    attributes: tuple[SensitiveAttribute, ...],
    epochs: int,
    progress: bool,
) -> tuple[Tensor, dict[str, float]]:
    train_idx, val_idx, test_idx = molecule_split(len(dataset))
    mu = dataset.target("mu").unsqueeze(1)
    mean, std = target_statistics(mu, train_idx)
    y = (mu - mean) / std
    # complete_graph appends the distance to the bond features: PyG's example's 5 columns.
    mpnn = MPNN(dataset.num_node_features, dataset.num_edge_features + 1, dim=DIM)
    attackers = {a.name: AttackerMLP(2 * DIM, a.num_outputs, hidden=(DIM,)) for a in attributes}
    trainer = GALTrainer.from_config(
        MPNNReadout(mpnn),
        _head(mpnn),
        attackers[attributes[0].name] if len(attackers) == 1 else attackers,
        task_loss=regression_loss,
        config=cfg.gal_config(lr=LEARNING_RATE),
        device=cfg.device,
        # opt-in: every batch of molecules has its own shape
        cuda_graphs=cfg.cuda_graphs_for(by_default=False),
    )
    scale = float(std)
    best = _BestValidation(
        _batches(dataset, y, val_idx, False), _batches(dataset, y, test_idx, False), scale
    )
    batches = _batches(dataset, y, train_idx, True, seed=cfg.seed)
    trainer.fit(None, batches, attributes, epochs, callbacks=[best], progress=progress)
    everything = torch.arange(len(dataset))
    z = _readouts(trainer, _batches(dataset, y, everything, False))
    task = {**best.best, "final_mae": _mae(trainer, best.test, scale)}
    return z, task


def _audit_split(dataset: MoleculeDataset, seed: int) -> tuple[Tensor, Tensor]:
    """The audit's attackers train on the training molecules and are scored on the test ones
    (the reference's attacker protocol); the split does not depend on the run's seed."""
    train_idx, _, test_idx = molecule_split(len(dataset))
    return train_idx, test_idx


QM9 = Setup(
    name="qm9",
    dataset_type=MoleculeDataset,
    epochs=40,
    attacker_epochs=30,
    attribute="alpha",
    task_metric="mae",
    train=train,
    attacks=("node",),
    audit_split=_audit_split,
    check_data=_check_split,
    steps_per_epoch=lambda dataset: -(-molecule_split(len(dataset))[0].numel() // BATCH_SIZE),
)
