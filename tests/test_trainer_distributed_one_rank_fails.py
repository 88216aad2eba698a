"""Two gloo processes where one alone raises outside a training step: a trainer built before
the process group, a callback's on_fit_start (a CheckpointEvery given to rank 0 alone), a
callback's on_epoch_end. The other process raises PeerFailed at once, where it would have
waited for the failed one until the group's timeout, and both stay in step (a fit after them
trains)."""

from __future__ import annotations

import pytest
import torch
from gal_fixtures import planted_graph
from gloo_group import join, scenario_outcomes, two_process_records
from torch import nn

from galfast import GALTrainer, SensitiveAttribute
from galfast.experiments.encoders import GNNStack
from galfast.models import AttackerMLP
from galfast.nn import SAGEConv
from galfast.train import (
    Callback,
    CheckpointEvery,
    NeighborSampling,
    NodeBatches,
    NodeHead,
    classification_loss,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DATA = planted_graph(num_nodes=48, seed=4)
# Longer than any of these fits, far shorter than the hard deadline below: a process that waits
# out the timeout fails the test's assertions instead of passing it slowly.
GROUP_TIMEOUT_S = 10


def _trainer() -> GALTrainer:
    torch.manual_seed(0)
    return GALTrainer(
        GNNStack([SAGEConv(DATA.x.size(1), 6), SAGEConv(6, 4)]),
        NodeHead(nn.Linear(4, 2)),
        AttackerMLP(4, 2),
        task_loss=classification_loss,
        adv_batch_size=8,
        sampler=NeighborSampling([3, 2]),
    )


def _fit(trainer, epochs=1, callbacks=()):
    batches = NodeBatches(torch.arange(48), DATA.y, batch_size=16)
    attribute = SensitiveAttribute("a", "binary", DATA.a)
    trainer.fit(
        DATA.graph, batches, attribute, x=DATA.x, epochs=epochs, callbacks=callbacks, progress=False
    )
    return trainer


class _FailsOnRankOne(Callback):
    """An evaluation that fails on rank 1 alone at the end of the second epoch."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def on_epoch_end(self, trainer, logs):
        if self.rank == 1 and logs["epoch"] == 2:
            raise RuntimeError("rank 1's evaluation failed")


def _built_before_the_group(rank, workdir, early):
    return {"epoch": _fit(early if rank == 1 else _trainer()).epoch}


def _checkpoint_folder_on_rank_zero(rank, workdir, early):
    callbacks = [CheckpointEvery("/proc/no-such-folder/{epoch}.pt")] if rank == 0 else []
    return {"epoch": _fit(_trainer(), callbacks=callbacks).epoch}


def _epoch_end_on_rank_one(rank, workdir, early):
    trainer = _trainer()
    try:
        _fit(trainer, epochs=3, callbacks=[_FailsOnRankOne(rank)])
    except Exception as error:
        return {"epoch": trainer.epoch, "error": f"{type(error).__name__}: {error}"}
    return {"epoch": trainer.epoch}


def _fit_after_them(rank, workdir, early):
    return {"epoch": _fit(_trainer()).epoch}


# In the order they run: one that left the processes out of step would fail the next ones.
SCENARIOS = {
    "a trainer built before the group on rank 1": _built_before_the_group,
    "a checkpoint folder that fails on rank 0": _checkpoint_folder_on_rank_zero,
    "an on_epoch_end that fails on rank 1": _epoch_end_on_rank_one,
    "a fit after them": _fit_after_them,
}


def _run_scenarios(rank: int, world_size: int, workdir: str) -> None:
    early = _trainer() if rank == 1 else None  # built as one process of one
    join(rank, world_size, workdir, seconds=GROUP_TIMEOUT_S)
    scenario_outcomes(SCENARIOS, rank, workdir, early)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("one_rank_fails"))
    return two_process_records(_run_scenarios, workdir, seconds=90)


def _errors(ranks, scenario):
    return [r[scenario].get("error", "no error") for r in ranks]


def test_a_trainer_built_before_the_group_on_one_process_fails_the_others(ranks):
    rank0, rank1 = _errors(ranks, "a trainer built before the group on rank 1")
    assert rank0.startswith("PeerFailed: process 1 of 2 failed in fit (its start)")
    assert rank1.startswith("ValueError: this trainer was built as process 0 of 1")


def test_a_callback_failing_at_fit_start_on_one_process_fails_the_others(ranks):
    rank0, rank1 = _errors(ranks, "a checkpoint folder that fails on rank 0")
    assert rank0.startswith("FileNotFoundError") and "/proc/no-such-folder" in rank0
    assert rank1.startswith(
        "PeerFailed: process 0 of 2 failed in fit (the callbacks' on_fit_start)"
    )


def test_a_callback_failing_at_an_epoch_end_on_one_process_fails_the_others(ranks):
    rank0, rank1 = (r["an on_epoch_end that fails on rank 1"] for r in ranks)
    assert rank0["epoch"] == rank1["epoch"] == 2  # both stopped after the failed epoch
    assert rank0["error"].startswith(
        "PeerFailed: process 1 of 2 failed in fit (the end of an epoch)"
    )
    assert rank1["error"] == "RuntimeError: rank 1's evaluation failed"


def test_the_processes_stay_in_step_after_one_failed(ranks):
    assert [r["a fit after them"] for r in ranks] == [{"epoch": 1}] * 2
