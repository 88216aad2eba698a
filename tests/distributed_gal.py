"""A small sampled GAL run for the multi-process tests: the same modules, graph and batches in
every process (tests/test_trainer_distributed.py spawns it under a gloo process group)."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from gal_fixtures import planted_graph
from torch import nn

from galfast import GALTrainer, SensitiveAttribute
from galfast.experiments.encoders import GNNStack
from galfast.models import AttackerMLP
from galfast.nn import GCNConv, SAGEConv
from galfast.train import NeighborSampling, NodeBatches, NodeHead, classification_loss
from galfast.train.sampled_encoding import SampledEncoder


def trainer_and_data():
    """A float64 trainer (fan-outs 3 and 2; batches of 25 and adversary batches of 21, so the
    processes' shares differ in size) and the arguments of its fit."""
    data = planted_graph(num_nodes=150, seed=5)
    torch.manual_seed(0)
    encoder = GNNStack([SAGEConv(data.x.size(1), 12), GCNConv(12, 6)]).double()
    trainer = GALTrainer(
        encoder,
        NodeHead(nn.Linear(6, 2)).double(),
        AttackerMLP(6, 2).double(),
        task_loss=classification_loss,
        lam=2.0,
        pairing="neighbor",
        adv_batch_size=21,
        seed=3,
        sampler=NeighborSampling([3, 2]),
    )
    batches = NodeBatches(data.train, data.y[data.train], batch_size=25)
    attr = SensitiveAttribute("a", "binary", data.a)
    return trainer, (data.graph, batches, attr), data.x.double()


def snapshot(trainer) -> dict:
    return {
        "modules": {
            name: {k: v.clone() for k, v in module.state_dict().items()}
            for name, module in (
                ("encoder", trainer.encoder),
                ("task_head", trainer.task_head),
                ("attacker", trainer.attacker),
            )
        },
        "adversary_optimizer": trainer.adversary_optimizer.state_dict(),
        "task_optimizer": trainer.task_optimizer.state_dict(),
        "history": trainer.history.to_list(),
    }


def counting_encode(counter: list):
    """A SampledEncoder.encode that adds the number of node entries it encodes to
    ``counter[0]`` (each process should encode only its share)."""
    original = SampledEncoder.encode

    def encode(self, encoder, nodes, step, purpose):
        counter[0] += nodes.numel()
        return original(self, encoder, nodes, step, purpose)

    return encode


def refusals(trainer) -> list[str]:
    """The errors of settings a multi-process run refuses: no sampler, Wasserstein."""
    messages = []
    modules = (trainer.encoder, trainer.task_head, trainer.attacker)
    for options in ({}, {"distance": "wasserstein", "sampler": NeighborSampling([3, 2])}):
        try:
            GALTrainer(*modules, task_loss=classification_loss, **options)
        except ValueError as err:
            messages.append(str(err))
    return messages


def run(rank: int, world_size: int, workdir: str, epochs: int) -> None:
    """One process: train ``epochs`` epochs, checkpoint, and record the final state."""
    torch.set_num_threads(1)
    init = f"file://{os.path.join(workdir, 'rendezvous')}"
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world_size)
    encoded = [0]
    SampledEncoder.encode = counting_encode(encoded)
    try:
        trainer, (graph, batches, attr), x = trainer_and_data()
        trainer.fit(graph, batches, attr, epochs=epochs, x=x, progress=False)
        saves = []
        if rank != 0:  # only rank 0 may write the checkpoint
            real_save = torch.save
            torch.save = lambda *args, **kwargs: saves.append(args) or real_save(*args, **kwargs)
        trainer.save_checkpoint(os.path.join(workdir, "checkpoint.pt"))
        record = snapshot(trainer)
        record["saves"], record["encoded"] = len(saves), encoded[0]
        record["refusals"] = refusals(trainer)
        torch.save = torch.serialization.save
        torch.save(record, os.path.join(workdir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()
