"""Data-parallel sampled GAL under torch.distributed (gloo, two CPU processes): the same steps
as one process with the same global batches, every process in step (encoder, task head,
attackers and both optimizers), checkpoints written by rank 0 alone that resume on one process.

Tolerance: float64 modules; two processes sum their scaled gradients in another order than one
process does, so values agree to rounding (relative 1e-9), not bit for bit.
"""

from __future__ import annotations

import os

import pytest
import torch
from distributed_gal import counting_encode, run, snapshot, trainer_and_data
from gloo_group import two_process_records

from galfast.train import init_distributed
from galfast.train.sampled_encoding import SampledEncoder

EPOCHS = 2


# Tiny tensors: one thread avoids oversubscribing shared 2-core machines.
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("ddp"))
    return workdir, two_process_records(run, workdir, EPOCHS, weights_only=False)


def _one_process(epochs, checkpoint=None):
    trainer, (graph, batches, attr), x = trainer_and_data()
    if checkpoint is not None:
        trainer.load_checkpoint(checkpoint)
    trainer.fit(graph, batches, attr, epochs=epochs, x=x, progress=False)
    return trainer


def _assert_close(mine, theirs, path=""):
    if isinstance(theirs, dict):
        assert set(mine) == set(theirs), path
        for key in theirs:
            _assert_close(mine[key], theirs[key], f"{path}.{key}")
    elif isinstance(theirs, (list, tuple)):
        assert len(mine) == len(theirs), path
        for i, (a, b) in enumerate(zip(mine, theirs)):
            _assert_close(a, b, f"{path}[{i}]")
    elif isinstance(theirs, torch.Tensor):
        torch.testing.assert_close(mine, theirs, rtol=1e-9, atol=1e-12, msg=path)
    elif isinstance(theirs, float) and not path.endswith("seconds"):
        assert mine == pytest.approx(theirs, rel=1e-9, abs=1e-12), path
    elif not isinstance(theirs, float):
        assert mine == theirs, path


def test_two_processes_take_the_one_process_steps(two_processes):
    _, (rank0, rank1) = two_processes
    one = snapshot(_one_process(EPOCHS))
    for key in ("modules", "task_optimizer", "adversary_optimizer", "history"):
        _assert_close(rank0[key], one[key], key)


def test_each_process_encodes_its_share_of_the_nodes(two_processes, monkeypatch):
    _, (rank0, rank1) = two_processes
    encoded = [0]
    monkeypatch.setattr(SampledEncoder, "encode", counting_encode(encoded))
    _one_process(EPOCHS)
    assert 0 < rank0["encoded"] < encoded[0]
    assert rank0["encoded"] + rank1["encoded"] == encoded[0]


def test_every_process_holds_the_same_modules_and_optimizers(two_processes):
    _, (rank0, rank1) = two_processes
    for key in ("modules", "task_optimizer", "adversary_optimizer"):
        _assert_close(rank1[key], rank0[key], key)


def test_settings_that_do_not_split_are_refused(two_processes):
    _, (rank0, _) = two_processes
    no_sampler, wasserstein = rank0["refusals"]
    assert "needs sampler=NeighborSampling" in no_sampler
    assert "distance='tv'" in wasserstein


def test_init_distributed_without_torchrun_is_one_process(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    expected = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    assert init_distributed() == expected
    assert not torch.distributed.is_initialized()


def test_rank_zero_alone_writes_and_one_process_resumes(two_processes):
    workdir, (rank0, rank1) = two_processes
    assert rank1["saves"] == 0
    checkpoint = os.path.join(workdir, "checkpoint.pt")
    assert os.path.exists(checkpoint) and not os.path.exists(checkpoint + ".tmp")
    resumed = snapshot(_one_process(EPOCHS + 1, checkpoint))
    straight = snapshot(_one_process(EPOCHS + 1))
    for key in ("modules", "task_optimizer", "adversary_optimizer", "history"):
        _assert_close(resumed[key], straight[key], key)
