"""Two gloo processes used as users get them wrong: rank 0 saving alone after fit, batches split
by rank, modules of other shapes, a process failing at fit start or mid-epoch, fit called
again on one process. Each is refused in every process or works, and a process never waits
longer than the group's timeout (the suite fails instead of hanging)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest
import torch
import torch.distributed as dist
from gal_fixtures import planted_graph
from gloo_group import (
    FailingLoss,
    join,
    outcome_of,
    save_outcome_after_a_failure,
    scenario_outcomes,
    two_process_records,
)
from torch import nn

from galfast import GALTrainer, SensitiveAttribute
from galfast.experiments.encoders import GNNStack
from galfast.models import AttackerMLP
from galfast.nn import SAGEConv
from galfast.train import NeighborSampling, NodeBatches, NodeHead, classification_loss

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DATA = planted_graph(num_nodes=64, seed=2)


@dataclass
class _Batch:
    nodes: torch.Tensor
    y: torch.Tensor


class _ShardedBatches:
    """A user's batches split by rank, as for DDP: equal attributes, other batches."""

    def __init__(self, nodes: torch.Tensor) -> None:
        self.nodes = nodes

    def __iter__(self):
        mine = self.nodes[dist.get_rank() :: dist.get_world_size()]
        return iter([_Batch(n, DATA.y[n]) for n in mine.split(8)])


def _trainer(hidden: int = 6, task_loss=classification_loss) -> GALTrainer:
    torch.manual_seed(0)
    return GALTrainer(
        GNNStack([SAGEConv(DATA.x.size(1), hidden), SAGEConv(hidden, 4)]),
        NodeHead(nn.Linear(4, 2)),
        AttackerMLP(4, 2),
        task_loss=task_loss,
        adv_batch_size=10,
        sampler=NeighborSampling([3, 2]),
    )


def _fit(trainer, batches=None, epochs=1, attribute=None):
    batches = NodeBatches(torch.arange(64), DATA.y, batch_size=16) if batches is None else batches
    sensitive = SensitiveAttribute("a", "binary", DATA.a if attribute is None else attribute)
    trainer.fit(DATA.graph, batches, sensitive, x=DATA.x, epochs=epochs, progress=False)
    return trainer


def _save_on_rank_zero(rank, workdir):
    trainer = _fit(_trainer())
    if rank == 0:  # the DDP idiom: rank 0 alone saves
        trainer.save_checkpoint(os.path.join(workdir, "rank0-alone.pt"))
    return {"epoch": trainer.epoch}


def _save_everywhere_then_load(rank, workdir):
    path = os.path.join(workdir, "everyone.pt")
    trainer = _fit(_trainer(), epochs=2)
    trainer.save_checkpoint(path)  # the others return once rank 0 has written it
    return {"loaded epoch": _trainer().load_checkpoint(path).epoch}


def _save_fails_on_rank_zero(rank, workdir):
    _fit(_trainer()).save_checkpoint(workdir)  # a folder: rank 0 cannot write it
    return {}


def _list_split_by_rank(rank, workdir):
    mine = torch.arange(64)[rank::2]
    return {"epoch": _fit(_trainer(), [_Batch(n, DATA.y[n]) for n in mine.split(8)]).epoch}


def _iterable_split_by_rank(rank, workdir):
    return {"epoch": _fit(_trainer(), _ShardedBatches(torch.arange(64))).epoch}


def _fit_again_on_rank_zero(rank, workdir):
    trainer = _fit(_trainer(), epochs=2)
    # Rank 0 trains on, rank 1 starts another run.
    _fit(trainer, epochs=3) if rank == 0 else _fit(_trainer())
    return {"epoch": trainer.epoch}


def _other_module_shapes(rank, workdir):
    return {"epoch": _fit(_trainer(hidden=6 + 2 * rank)).epoch}


def _attribute_fails_on_rank_one(rank, workdir):
    attribute = DATA.a[:50] if rank == 1 else DATA.a  # read from another file?
    return {"epoch": _fit(_trainer(), attribute=attribute).epoch}


# In the order they run: a scenario that left the processes out of step would fail the next.
SCENARIOS = {
    "rank 0 saves alone": _save_on_rank_zero,
    "every rank saves, then loads": _save_everywhere_then_load,
    "rank 0 cannot write": _save_fails_on_rank_zero,
    "a list split by rank": _list_split_by_rank,
    "an iterable split by rank": _iterable_split_by_rank,
    "fit again on rank 0": _fit_again_on_rank_zero,
    "other module shapes": _other_module_shapes,
    "an attribute that fails on rank 1": _attribute_fails_on_rank_one,
}


def _run_scenarios(rank: int, world_size: int, workdir: str) -> None:
    join(rank, world_size, workdir, seconds=20)
    scenario_outcomes(SCENARIOS, rank, workdir)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("misuse"))
    return workdir, two_process_records(_run_scenarios, workdir, seconds=120)


def _errors(outcomes, scenario):
    return [o[scenario].get("error", "no error") for o in outcomes]


def test_rank_zero_saves_alone_after_fit(outcomes):
    workdir, ranks = outcomes
    assert [o["rank 0 saves alone"] for o in ranks] == [{"epoch": 1}] * 2
    assert _trainer().load_checkpoint(os.path.join(workdir, "rank0-alone.pt")).epoch == 1


def test_every_rank_saving_may_load_the_file_at_once(outcomes):
    _, ranks = outcomes
    assert [o["every rank saves, then loads"] for o in ranks] == [{"loaded epoch": 2}] * 2


def test_a_failed_write_on_rank_zero_raises_in_every_process(outcomes):
    rank0, rank1 = _errors(outcomes[1], "rank 0 cannot write")
    assert rank0.startswith("ValueError") and "is a folder" in rank0
    assert rank1.startswith("OSError: rank 0 could not write the checkpoint")


@pytest.mark.parametrize("scenario", ["a list split by rank", "an iterable split by rank"])
def test_batches_split_by_rank_are_refused(outcomes, scenario):
    for error in _errors(outcomes[1], scenario):
        assert "different first task batch (or every batch of a list)" in error


def test_fit_called_again_on_one_process_is_refused(outcomes):
    for error in _errors(outcomes[1], "fit again on rank 0"):
        assert "different epochs" in error


def test_modules_of_other_shapes_are_refused_before_the_broadcast(outcomes):
    for error in _errors(outcomes[1], "other module shapes"):
        assert "different modules (parameter and buffer shapes)" in error


def test_a_process_failing_at_fit_start_fails_the_others_at_once(outcomes):
    rank0, rank1 = _errors(outcomes[1], "an attribute that fails on rank 1")
    assert "PeerFailed: process 1 of 2 failed in fit (its start)" in rank0
    assert rank1.startswith("ValueError") and "PeerFailed" not in rank1


def _run_failing_step(rank: int, world_size: int, workdir: str) -> None:
    join(rank, world_size, workdir, seconds=5)
    trainer = _trainer(task_loss=FailingLoss(rank, failing_call=3))
    outcome = outcome_of(lambda: _fit(trainer, epochs=2))
    save_outcome_after_a_failure(rank, workdir, outcome)


def test_a_process_failing_mid_epoch_fails_the_others_within_the_timeout(tmp_path):
    rank0, rank1 = two_process_records(_run_failing_step, str(tmp_path), seconds=120)
    assert rank1["error"] == "RuntimeError: rank 1's own failure"
    assert "process 0 of 2 lost the others in fit (the gradient averaging" in rank0["error"]
