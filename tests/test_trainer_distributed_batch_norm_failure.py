"""A process that fails mid-step in a sampled run whose encoder holds a galfast.nn.BatchNorm
(tests/distributed_gal_batch_norm.py): the other, waiting in the BatchNorm's reduction over the
processes, raises within the group's timeout naming that reduction and itself, not with
torch's bare gloo message."""

from __future__ import annotations

import pytest
from distributed_gal_batch_norm import gal_run
from gloo_group import (
    FailingLoss,
    join,
    outcome_of,
    save_outcome_after_a_failure,
    two_process_records,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _run(rank: int, world_size: int, workdir: str) -> None:
    join(rank, world_size, workdir, seconds=5)
    trainer, args = gal_run("overlap")
    trainer.task_loss = FailingLoss(rank, failing_call=2)  # after its encoder's forward
    outcome = outcome_of(lambda: trainer.fit(*args, epochs=1, progress=False))
    save_outcome_after_a_failure(rank, workdir, outcome)


def test_a_process_failing_mid_step_names_the_batch_norm_reduction_it_lost(tmp_path):
    rank0, rank1 = two_process_records(_run, str(tmp_path), seconds=90)
    assert rank1["error"] == "RuntimeError: rank 1's own failure"
    assert "process 0 of 2 lost the others in BatchNorm across processes" in rank0["error"]
