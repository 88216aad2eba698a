"""Multi-process sampled training given what a user may get wrong: processes built with other
data, settings or batches are refused in every process (not averaged into a run of neither, nor
left to abort or hang in a collective), a callback that stops one process stops all, and a
checkpoint callback on rank 0 alone saves without the others; and a hand-built Block refuses
graph ids its layers would read out of place."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest
import torch
from gal_fixtures import planted_graph
from gloo_group import join, two_process_records
from torch import nn

from galfast import GALTrainer, Graph, SensitiveAttribute
from galfast.experiments.encoders import GNNStack
from galfast.models import AttackerMLP
from galfast.nn import SAGEConv
from galfast.ops import Block
from galfast.train import (
    Callback,
    CheckpointEvery,
    NeighborSampling,
    NodeBatches,
    NodeHead,
    classification_loss,
)
from galfast.train.distributed import fingerprint

pytestmark = pytest.mark.usefixtures("one_torch_thread")

BATCH = 16


@dataclass
class _TaggedBatch:
    """A user's node batch with a field of another kind: its repr (an address) differs
    between processes that hold equal batches."""

    nodes: torch.Tensor
    y: torch.Tensor
    source: object


def _batches(scenario: str, nodes: torch.Tensor, y: torch.Tensor):
    if scenario == "object field":
        return [_TaggedBatch(n, t, object()) for n, t in zip(nodes.split(BATCH), y.split(BATCH))]
    return NodeBatches(nodes, y, batch_size=BATCH, shuffle=False)


def _fit(rank: int, scenario: str, callbacks=()) -> GALTrainer:
    """A tiny sampled fit; rank 1 changes what ``scenario`` names."""
    data = planted_graph(num_nodes=64, seed=2)
    x, attribute = data.x, data.a
    nodes = torch.arange(48 if scenario == "fewer batches" and rank == 1 else 64)
    y = data.y[nodes]
    if rank == 1:
        x = x + 1 if scenario == "features" else x
        attribute = 1 - attribute if scenario == "attribute" else attribute
        y = 1 - y if scenario == "targets" else y
    torch.manual_seed(0)
    trainer = GALTrainer(
        GNNStack([SAGEConv(x.size(1), 6), SAGEConv(6, 4)]),
        NodeHead(nn.Linear(4, 2)),
        AttackerMLP(4, 2),
        task_loss=classification_loss,
        lam=1.0,
        adv_batch_size=10,
        seed=rank if scenario == "seed" else 0,
        sampler=NeighborSampling([3, 2]),
    )
    batches = _batches(scenario, nodes, y)
    sensitive = SensitiveAttribute("a", "binary", attribute)
    trainer.fit(data.graph, batches, sensitive, x=x, epochs=2, progress=False, callbacks=callbacks)
    return trainer


class _StopRankZero(Callback):
    def __init__(self, rank: int) -> None:
        self.rank = rank

    def on_epoch_end(self, trainer, logs) -> None:
        if self.rank == 0 and logs["epoch"] == 1:
            trainer.stop_training = True


# The hazardous scenarios last: before the checks, "stop" and "checkpoint on rank 0" hung
# and "fewer batches" aborted the processes.
SCENARIOS = (
    "same",
    "object field",
    "features",
    "attribute",
    "seed",
    "targets",
    "stop",
    "checkpoint on rank 0",
    "fewer batches",
)


def _callbacks(rank: int, scenario: str, workdir: str) -> list:
    if scenario == "stop":
        return [_StopRankZero(rank)]
    if scenario == "checkpoint on rank 0" and rank == 0:
        return [CheckpointEvery(os.path.join(workdir, "epoch{epoch}.pt"))]
    return []


def _run(rank: int, world_size: int, workdir: str) -> None:
    join(rank, world_size, workdir)
    outcome = {}
    for scenario in SCENARIOS:
        try:
            trainer = _fit(rank, scenario, _callbacks(rank, scenario, workdir))
            outcome[scenario] = {"epoch": trainer.epoch}
        except ValueError as error:
            outcome[scenario] = {"error": str(error)}
    torch.save(outcome, os.path.join(workdir, f"rank{rank}.pt"))


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("scaleout"))
    return workdir, two_process_records(_run, workdir)


@pytest.mark.parametrize("scenario", ["same", "object field"])
def test_processes_with_the_same_data_train(outcomes, scenario):
    assert [o[scenario] for o in outcomes[1]] == [{"epoch": 2}] * 2


@pytest.mark.parametrize(
    "scenario, named",
    [
        ("features", "different x"),
        ("attribute", "different sensitive attribute 'a'"),
        ("seed", "different settings"),
        ("targets", "different task batch settings"),
        ("fewer batches", "different task batch settings"),
    ],
)
def test_processes_with_other_data_are_refused_in_every_process(outcomes, scenario, named):
    for outcome in outcomes[1]:
        assert named in outcome[scenario].get("error", "trained on")


def test_a_callback_stopping_one_process_stops_every_process(outcomes):
    assert [o["stop"] for o in outcomes[1]] == [{"epoch": 1}] * 2


def test_a_checkpoint_callback_on_rank_zero_alone_saves_and_every_process_trains(outcomes):
    workdir, ranks = outcomes
    assert [o["checkpoint on rank 0"] for o in ranks] == [{"epoch": 2}] * 2
    assert {name for name in os.listdir(workdir) if name.startswith("epoch")} == {
        "epoch1.pt",
        "epoch2.pt",
    }


def test_fingerprint_tells_bytes_apart_whatever_the_chunking(monkeypatch):
    values = [torch.arange(10.0), torch.tensor([True, False]), 3, None]
    whole = fingerprint(values, torch.device("cpu"))
    monkeypatch.setattr("galfast.train.distributed._FINGERPRINT_CHUNK", 3)
    assert int(fingerprint(values, torch.device("cpu"))) == int(whole)
    edited = [torch.arange(10.0).index_fill(0, torch.tensor([7]), 7.5), *values[1:]]
    assert int(fingerprint(edited, torch.device("cpu"))) != int(whole)
    assert int(fingerprint([torch.arange(10.0).double(), *values[1:]], "cpu")) != int(whole)


def _hand_built_block(src_nodes, edge_id, graph=None):
    rowptr, col = torch.tensor([0, 1]), torch.tensor([1])
    return Block(1, torch.tensor(src_nodes), rowptr, col, torch.tensor(edge_id), graph)


@pytest.mark.parametrize(
    "src_nodes, edge_id, named",
    [
        ([0, -1], [0], "src_nodes holds -1"),  # GCNConv read the last node's degree
        ([0, 5], [0], "src_nodes holds 5"),
        ([0, 1], [7], "edge_id holds 7"),
        ([0, 1], [-1], "edge_id holds -1"),
    ],
)
def test_a_hand_built_block_refuses_ids_outside_its_graph(src_nodes, edge_id, named):
    graph = Graph.from_edge_index(torch.tensor([[1, 2, 0], [0, 0, 1]]), num_nodes=3)
    with pytest.raises(ValueError, match=named):
        _hand_built_block(src_nodes, edge_id, graph)


def test_a_hand_built_block_without_a_graph_refuses_negative_ids():
    with pytest.raises(ValueError, match="src_nodes holds -2"):
        _hand_built_block([0, -2], [0])
    assert _hand_built_block([0, 9], [4]).num_src == 2
