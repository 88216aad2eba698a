"""Sampled GAL on two gloo processes with the paper's EmbeddingEncoder, whose
galfast.nn.BatchNorm then takes its batch statistics over both processes' rows
(tests/distributed_gal_batch_norm.py).

Where the processes' rows of every step are disjoint (the ``separate`` and ``joint`` runs,
see ``gal_run``; rank 0 holds no row of some steps and one node of others), the synchronised
statistics are the one-process ones, so the run is one process's: float64 modules, values
agreeing to rounding (relative 1e-9, as tests/test_trainer_distributed.py) where each process
normalising its own share alone differed by about 1e-2 in the losses. Where a node is sampled
by both processes (``overlap``) it counts twice, so the run is only close to one process's;
it must still keep every process identical.
"""

from __future__ import annotations

import pytest
import torch
from distributed_gal_batch_norm import EPOCHS, GAL_KINDS, gal_record, gal_run, run
from gloo_group import two_process_records
from torch import nn

pytestmark = pytest.mark.usefixtures("one_torch_thread")
MODULES = ("encoder", "task_head", "attacker")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    return two_process_records(run, str(tmp_path_factory.mktemp("ddp_bn")))


def _one_process(kind: str) -> dict:
    trainer, args = gal_run(kind)
    trainer.fit(*args, epochs=EPOCHS, progress=False)
    return gal_record(trainer)


@pytest.mark.parametrize("kind", GAL_KINDS)
def test_every_process_holds_the_same_batch_norm_buffers_and_modules(ranks, kind):
    mine, theirs = ranks[0][kind], ranks[1][kind]
    assert {"norm.module.running_mean", "norm.module.running_var"} <= set(mine["encoder"])
    for module in MODULES:
        for key, value in mine[module].items():
            assert torch.equal(value, theirs[module][key]), f"{module}.{key}"
    assert torch.equal(mine["embeddings"], theirs["embeddings"])
    assert mine["history"] == theirs["history"]


@pytest.mark.parametrize("kind", ["separate", "joint"])
def test_disjoint_shares_take_the_one_process_steps(ranks, kind):
    one, two = _one_process(kind), ranks[0][kind]
    for module in MODULES:
        for key, value in one[module].items():
            torch.testing.assert_close(two[module][key], value, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(two["embeddings"], one["embeddings"], rtol=1e-9, atol=1e-12)
    assert len(two["history"]) == EPOCHS
    for mine, theirs in zip(two["history"], one["history"]):
        assert set(mine) == set(theirs)
        for key, value in theirs.items():
            assert mine[key] == (pytest.approx(value, rel=1e-9) if "loss" in key else value)


def test_torch_batch_norm_in_the_encoder_is_refused(ranks):
    for r in ranks:
        message = r["refusal"]
        assert "encoder's norm is a torch.nn.BatchNorm1d" in message
        assert "galfast.nn.BatchNorm" in message


def test_an_embedding_max_norm_in_the_encoder_is_refused(ranks):
    # Each process rescaled the rows its own share looked up: the tables drifted apart (2.2).
    for r in ranks:
        assert "has max_norm=0.5: in multi-process sampled training" in r["max_norm refusal"]


def test_one_process_trains_with_torch_batch_norm():
    trainer, args = gal_run("overlap", nn.BatchNorm1d)
    trainer.fit(*args, epochs=1, progress=False)
    assert trainer.history.to_list()[0]["task_steps"] == 3
    assert int(trainer.encoder.norm.num_batches_tracked) > 0
