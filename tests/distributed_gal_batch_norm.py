"""Sampled GAL runs whose EmbeddingEncoder holds a galfast.nn.BatchNorm, for
tests/test_trainer_distributed_batch_norm.py: the same modules, graph and batches in every
process (spawned under a gloo process group)."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from gal_fixtures import planted_graph
from gloo_group import join
from torch import nn

from galfast import GALTrainer, Graph, SensitiveAttribute
from galfast.models import AttackerMLP, EmbeddingEncoder
from galfast.nn import BatchNorm, GCNConv, SAGEConv
from galfast.train import NeighborSampling, NodeBatches, NodeHead, classification_loss


def _pairs(num_nodes: int) -> Graph:
    """Nodes 2i and 2i + 1 linked, nothing else: an even node's sampled computation graph is
    itself and its partner, whoever samples it."""
    even = torch.arange(0, num_nodes, 2)
    return Graph.from_edge_index(torch.stack([even, even + 1]), num_nodes, symmetrize=True)


def gal_run(kind: str, batch_norm: type = BatchNorm, max_norm=None):
    """(trainer, fit arguments) of a float64 sampled run with the paper's EmbeddingEncoder.

    ``separate`` / ``joint`` (``adv_update``): on :func:`_pairs`, the task trains on 9 even
    nodes in batches of 4, 4 and 1 (rank 0 holds no row of the last) and the adversary sees
    other even nodes, 3 a batch (rank 0 encodes one): the processes' shares of every step are
    disjoint sets of rows, so the synchronised statistics are the one-process ones.
    ``overlap``: a graph with edges, where a node sampled by both processes counts twice in
    the synchronised statistics (close to, not equal to, one process)."""
    data = planted_graph(num_nodes=40, seed=5)
    torch.manual_seed(0)
    convs = [SAGEConv(8, 8), GCNConv(8, 4)]
    encoder = EmbeddingEncoder(40, 8, convs, max_norm=max_norm).double()
    if batch_norm is not BatchNorm:
        encoder.norm = batch_norm(8).double()
    trainer = GALTrainer(
        encoder,
        NodeHead(nn.Linear(4, 2)).double(),
        AttackerMLP(4, 2).double(),
        task_loss=classification_loss,
        lam=2.0,
        adv_batch_size=21 if kind == "overlap" else 3,
        adv_update="joint" if kind == "joint" else "separate",
        seed=3,
        sampler=NeighborSampling([3, 2]),
    )
    if kind == "overlap":
        train, graph, known = data.train[:21], data.graph, None
    else:
        train, graph = torch.arange(0, 18, 2), _pairs(40)
        known = torch.zeros(40, dtype=torch.bool)
        known[18::2] = True
    batches = NodeBatches(train, data.y[train], batch_size=10 if kind == "overlap" else 4)
    return trainer, (graph, batches, SensitiveAttribute("a", "binary", data.a, mask=known))


GAL_KINDS = ("separate", "joint", "overlap")
EPOCHS = 2


def gal_record(trainer) -> dict:
    """The trained modules, the history (without timings) and the embeddings."""
    return {
        "embeddings": trainer.embed(),
        "encoder": {k: v.clone() for k, v in trainer.encoder.state_dict().items()},
        "task_head": {k: v.clone() for k, v in trainer.task_head.state_dict().items()},
        "attacker": {k: v.clone() for k, v in trainer.attacker.state_dict().items()},
        "history": [
            {k: v for k, v in epoch.items() if k != "seconds"}
            for epoch in trainer.history.to_list()
        ],
    }


def run(rank: int, world_size: int, workdir: str) -> None:
    join(rank, world_size, workdir)
    try:
        record = {}
        for kind in GAL_KINDS:
            trainer, args = gal_run(kind)
            trainer.fit(*args, epochs=EPOCHS, progress=False)
            record[kind] = gal_record(trainer)
        trainer, args = gal_run("overlap", nn.BatchNorm1d)
        try:
            trainer.fit(*args, epochs=1, progress=False)
        except ValueError as err:
            record["refusal"] = str(err)
        trainer, args = gal_run("overlap", max_norm=0.5)
        try:
            trainer.fit(*args, epochs=1, progress=False)
        except ValueError as err:
            record["max_norm refusal"] = str(err)
        torch.save(record, os.path.join(workdir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()
