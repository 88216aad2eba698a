"""Two gloo processes where one owns no item of a batch (batches of one item, so rank 0's
share of every batch is empty): the run must still take the one-process steps. With float64
modules the empty share's loss used to be a float32 zero, and gloo aborted the whole run (a C++
"Received data size doesn't match expected size") at the epoch's all_reduce of the losses."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
from gal_fixtures import planted_graph
from gloo_group import join, two_process_records
from torch import nn

from galfast import GALTrainer, SensitiveAttribute
from galfast.experiments.encoders import GNNStack
from galfast.models import AttackerMLP
from galfast.nn import GCNConv, SAGEConv
from galfast.train import NeighborSampling, NodeBatches, NodeHead, classification_loss

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# (task batch size, adversary batch size): one item a task batch, or one node an adversary
# batch; either way rank 0's share is empty at every such step.
SIZES = {"task": (1, 21), "adversary": (2, 1)}


def _trained(sizes: tuple[int, int]) -> list[dict]:
    batch_size, adv_batch_size = sizes
    data = planted_graph(num_nodes=40, seed=5)
    torch.manual_seed(0)
    trainer = GALTrainer(
        GNNStack([SAGEConv(data.x.size(1), 8), GCNConv(8, 4)]).double(),
        NodeHead(nn.Linear(4, 2)).double(),
        AttackerMLP(4, 2).double(),
        task_loss=classification_loss,
        lam=2.0,
        adv_batch_size=adv_batch_size,
        seed=3,
        sampler=NeighborSampling([3, 2]),
    )
    train = data.train[:4]
    batches = NodeBatches(train, data.y[train], batch_size=batch_size)
    attr = SensitiveAttribute("a", "binary", data.a)
    trainer.fit(data.graph, batches, attr, epochs=1, x=data.x.double(), progress=False)
    return trainer.history.to_list()


def _run(rank: int, world_size: int, workdir: str, sizes: tuple[int, int]) -> None:
    join(rank, world_size, workdir)
    try:
        torch.save(_trained(sizes), os.path.join(workdir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("empty", sorted(SIZES))
def test_a_process_without_items_still_takes_the_one_process_steps(empty, tmp_path):
    histories = two_process_records(_run, str(tmp_path), SIZES[empty])
    one = _trained(SIZES[empty])
    for history in histories:
        assert len(history) == len(one)
        for mine, theirs in zip(history, one):
            assert mine.keys() == theirs.keys()
            for key, value in theirs.items():
                if isinstance(value, float) and key != "seconds":
                    assert mine[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
                elif key != "seconds":
                    assert mine[key] == value, key
