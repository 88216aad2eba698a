"""Joining the gloo process group of a multi-process test (spawned CPU processes)."""

from __future__ import annotations

import datetime
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def join(rank: int, world_size: int, workdir: str, seconds: float = 60) -> None:
    """Joins the test processes' gloo group through a file in ``workdir``, one torch thread
    each. A collective that a process misses fails after ``seconds`` instead of hanging."""
    torch.set_num_threads(1)
    init = f"file://{os.path.join(workdir, 'rendezvous')}"
    timeout = datetime.timedelta(seconds=seconds)
    dist.init_process_group(
        "gloo", init_method=init, rank=rank, world_size=world_size, timeout=timeout
    )


def two_process_records(
    run, workdir: str, *args, seconds: float = 300, weights_only: bool = True
) -> list:
    """Spawns ``run(rank, 2, workdir, *args)`` on two processes and returns what each saved
    to ``workdir/rank{r}.pt``. Processes still running after ``seconds`` (a wait that a
    timeout should have ended) are terminated and the test fails instead of hanging."""
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    context = mp.spawn(_run_then_exit, args=(run, 2, workdir, *args), nprocs=2, join=False)
    deadline = time.monotonic() + seconds
    while not context.join(timeout=max(deadline - time.monotonic(), 0)):
        if time.monotonic() >= deadline:
            for process in context.processes:
                process.terminate()
            raise TimeoutError(f"the two processes still ran after {seconds} s: a hang")
    paths = [os.path.join(workdir, f"rank{r}.pt") for r in (0, 1)]
    return [torch.load(path, weights_only=weights_only) for path in paths]


def _run_then_exit(rank: int, run, *args) -> None:
    """Runs ``run(rank, *args)`` in a spawned process and ends the process without the
    interpreter's teardown: gloo's threads after a refused or timed-out collective may call
    std::terminate (SIGABRT) as they are destroyed, failing a test whose records were saved."""
    try:
        run(rank, *args)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def save_outcome_after_a_failure(rank: int, workdir: str, outcome: dict) -> None:
    """Saves ``outcome`` as ``workdir/rank{rank}.pt`` in a test where one process failed
    mid-run. Rank 1 lives on (a caller that catches its error) until rank 0 has saved,
    bounded so that a rank 0 that hangs fails the test."""
    torch.save(outcome, os.path.join(workdir, f"rank{rank}.pt"))
    deadline = time.monotonic() + 60
    while rank == 1 and time.monotonic() < deadline:
        if os.path.exists(os.path.join(workdir, "rank0.pt")):
            break
        time.sleep(0.1)


class FailingLoss:
    """A task loss that raises on rank 1's ``failing_call``-th step (a bad batch, an
    out-of-memory...) and is ``classification_loss`` otherwise."""

    def __init__(self, rank: int, failing_call: int) -> None:
        self.rank, self.failing_call, self.calls = rank, failing_call, 0

    def __call__(self, out, batch):
        from galfast.train import classification_loss

        self.calls += 1
        if self.rank == 1 and self.calls == self.failing_call:
            raise RuntimeError("rank 1's own failure")
        return classification_loss(out, batch)


def scenario_outcomes(scenarios: dict, rank: int, workdir: str, *args) -> None:
    """Runs each of ``scenarios`` (name -> ``scenario(rank, workdir, *args)``, returning an
    outcome dict) in turn, saves their outcomes, an error as its type and message, to
    ``workdir/rank{rank}.pt``."""
    outcomes = {
        name: outcome_of(scenario, rank, workdir, *args) for name, scenario in scenarios.items()
    }
    torch.save(outcomes, os.path.join(workdir, f"rank{rank}.pt"))


def outcome_of(run, *args) -> dict:
    """``run(*args)``'s outcome: what it returns where that is a dict, else {}; or its error
    as ``{"error": "Type: message"}``."""
    try:
        result = run(*args)
        return result if isinstance(result, dict) else {}
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}"}
