"""Sampled GAL on two gloo processes whose task head and attacker hold torch BatchNorm:
each process moves their running statistics by its own share of every batch, so without the
trainer taking rank 0's buffers at each epoch's end the processes' modules drifted apart
(different predictions in eval mode, and a checkpoint holding rank 0's alone)."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
from gal_fixtures import planted_graph
from gloo_group import join, two_process_records
from torch import nn

from galfast import GALTrainer, SensitiveAttribute
from galfast.models import AttackerMLP, EmbeddingEncoder
from galfast.nn import GCNConv, SAGEConv
from galfast.train import NeighborSampling, NodeBatches, NodeHead, classification_loss

pytestmark = pytest.mark.usefixtures("one_torch_thread")
MODULES = ("encoder", "task_head", "attacker")


def _trainer() -> tuple[GALTrainer, tuple]:
    data = planted_graph(num_nodes=40, seed=5)
    torch.manual_seed(0)
    trainer = GALTrainer(
        EmbeddingEncoder(40, 8, [SAGEConv(8, 8), GCNConv(8, 4)]),
        NodeHead(nn.Sequential(nn.BatchNorm1d(4), nn.Linear(4, 2))),
        nn.Sequential(nn.BatchNorm1d(4), AttackerMLP(4, 2)),
        task_loss=classification_loss,
        lam=1.0,
        adv_batch_size=10,
        seed=3,
        sampler=NeighborSampling([3, 2]),
    )
    batches = NodeBatches(data.train, data.y[data.train], batch_size=8)
    return trainer, (data.graph, batches, SensitiveAttribute("a", "binary", data.a))


def _fit_and_record(trainer, args) -> dict:
    trainer.fit(*args, epochs=2, progress=False)
    return {
        module: {k: v.clone() for k, v in getattr(trainer, module).state_dict().items()}
        for module in MODULES
    }


def _run(rank: int, world_size: int, workdir: str) -> None:
    join(rank, world_size, workdir)
    try:
        record = _fit_and_record(*_trainer())
        torch.save(record, os.path.join(workdir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    return two_process_records(_run, str(tmp_path_factory.mktemp("head_buffers")))


def test_every_process_holds_the_same_head_and_attacker_buffers(ranks):
    mine, theirs = ranks
    assert "module.0.running_mean" in mine["task_head"] and "0.running_var" in mine["attacker"]
    for module in MODULES:
        for key, value in mine[module].items():
            assert torch.equal(value, theirs[module][key]), f"{module}.{key}"


def test_the_running_statistics_moved(ranks):
    """The buffers are rank 0's moved statistics, not the fresh ones broadcast at the start."""
    fresh = nn.BatchNorm1d(4)
    head = ranks[0]["task_head"]
    assert int(head["module.0.num_batches_tracked"]) > 0
    assert not torch.equal(head["module.0.running_mean"], fresh.running_mean)
