"""The audit's forked worker processes: the same results as threads, errors carried back,
no process left behind."""

from __future__ import annotations

import importlib
import json
import os
import sys

import pytest
import torch
from same_galfast import run_python

from galfast.audit.forked_workers import ForkedWorkers, forking_is_safe
from galfast.audit.jobs import Jobs

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork: Linux only")
search = importlib.import_module("galfast.audit.search")


def _square_and_pid(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    return x * x, os.getpid()


def _raise_value_error(message: str) -> None:
    raise ValueError(message)


def _die() -> None:
    os._exit(3)


def _unpicklable_result() -> object:
    return lambda: None


def _fit_args() -> tuple:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(300, 6, generator=gen)
    y = (x[:, 0] + 0.3 * torch.randn(300, generator=gen) > 0).long()
    config = search.HeadConfig(depth=2, width=16, lr=0.01, weight_decay=1e-4, balanced=True)
    budget = search.SearchConfig(max_epochs=5, patience=2, batch_size=64)
    return (config, "binary", 1, x[:240], y[:240], x[240:], y[240:]), {"seed": 7, "search": budget}


def test_calls_run_in_other_processes_and_return_their_results():
    workers = ForkedWorkers(2, threads=1)
    try:
        pids = set()
        for k in range(6):
            out, pid = workers.call(k % 2, _square_and_pid, (torch.full((3,), float(k)),), {})
            assert torch.equal(out, torch.full((3,), float(k * k)))
            pids.add(pid)
        assert os.getpid() not in pids
    finally:
        workers.close()


def test_a_head_fit_in_a_process_is_bitwise_the_fit_on_a_thread():
    args, kwargs = _fit_args()
    on_thread = Jobs(2, 1, processes=False)
    in_process = Jobs(2, 1, processes=True)
    try:
        a = on_thread.submit(search.fit_head, *args, **kwargs).result()
        b = in_process.submit(search.fit_head, *args, **kwargs).result()
    finally:
        on_thread.close()
        in_process.close()
    assert a.epochs == b.epochs and a.val_score == b.val_score
    for (name, p), (_, q) in zip(a.model.state_dict().items(), b.model.state_dict().items()):
        assert torch.equal(p, q), name
    x = args[5]
    assert torch.equal(a.predict(x)[1], b.predict(x)[1])


def test_an_exception_in_a_worker_is_raised_to_the_caller_with_its_type():
    jobs = Jobs(2, 1, processes=True)
    try:
        future = jobs.submit(_raise_value_error, "bad attacker input")
        with pytest.raises(ValueError, match="bad attacker input"):
            future.result()
        # the worker survives its call's exception
        assert torch.equal(jobs.submit(_square_and_pid, torch.ones(2)).result()[0], torch.ones(2))
    finally:
        jobs.close()


def test_a_worker_that_dies_is_reported_not_waited_for():
    workers = ForkedWorkers(1, threads=1)
    try:
        with pytest.raises(RuntimeError, match="died"):
            workers.call(0, _die, (), {})
    finally:
        workers.close()


def test_an_unpicklable_result_is_a_clear_error():
    workers = ForkedWorkers(1, threads=1)
    try:
        with pytest.raises(RuntimeError, match="could not send back its result"):
            workers.call(0, _unpicklable_result, (), {})
    finally:
        workers.close()


def test_close_reaps_every_worker():
    workers = ForkedWorkers(2, threads=1)
    pids = [pid for pid, _ in workers._workers]
    workers.close()
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_processes_are_chosen_only_where_forking_is_safe(monkeypatch):
    assert forking_is_safe() == (not torch.cuda.is_initialized())
    monkeypatch.setattr(sys, "platform", "darwin")
    assert not forking_is_safe()
    assert Jobs(2, 1)._processes is False


def test_workers_with_several_threads_are_never_forked():
    assert not forking_is_safe(2)
    assert Jobs(2, 2)._processes is False


def test_an_audit_on_two_threads_after_a_parallel_op_finishes():
    # A fork after GNU OpenMP's pool started left a child's matmul waiting forever: run it in
    # a process of its own, so a regression fails on the timeout instead of hanging the suite.
    script = """
import torch
from galfast import SensitiveAttribute, audit
torch.set_num_threads(2)
torch.randn(300, 300) @ torch.randn(300, 300)
attr = SensitiveAttribute("s", "binary", torch.arange(60) % 2)
audit(torch.randn(60, 8), attr, train_idx=torch.arange(40), test_idx=torch.arange(40, 60),
      attacks=["node"], seeds=2, epochs=1, min_steps=1, threads=2, workers=2)
print("finished")
"""
    assert run_python(script, timeout=120).stdout.strip() == "finished"


def test_one_worker_runs_in_the_callers_thread_and_forks_nothing():
    jobs = Jobs(1, 1, processes=True)
    try:
        out, pid = jobs.submit(_square_and_pid, torch.ones(2)).result()
        assert pid == os.getpid() and jobs._forked is None
    finally:
        jobs.close()


@pytest.mark.parametrize("strength", ["fast", "strong"])
def test_an_audit_on_processes_reports_what_it_reports_on_threads(monkeypatch, strength):
    from test_audit_workers import SEARCH, _case

    from galfast import audit

    jobs_module = importlib.import_module("galfast.audit.jobs")
    z, graph, attrs = _case()
    kwargs = dict(
        graph=graph, train_idx=torch.arange(110), test_idx=torch.arange(110, 160),
        attacks=("node", "neighbor"), seeds=2, min_steps=30, epochs=2, strength=strength,
        search=SEARCH, workers=2,
    )  # fmt: skip
    monkeypatch.setattr(jobs_module, "forking_is_safe", lambda threads=1: True)
    on_processes = audit(z, attrs, **kwargs).to_json()
    monkeypatch.setattr(jobs_module, "forking_is_safe", lambda threads=1: False)
    assert audit(z, attrs, **kwargs).to_json() == on_processes


def test_a_failed_fork_falls_back_to_threads(monkeypatch):
    def no_fork():
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(os, "fork", no_fork)
    jobs = Jobs(2, 1, processes=True)
    try:
        out, pid = jobs.submit(_square_and_pid, torch.ones(2)).result()
        assert pid == os.getpid() and jobs._forked is None
    finally:
        jobs.close()


def test_a_fitted_head_pickles_its_weights_once():
    import pickle

    args, kwargs = _fit_args()
    fitted = search.fit_head(*args, **kwargs)
    weights = sum(p.numel() * p.element_size() for p in fitted.model.parameters())
    assert all(p.grad is None for p in fitted.model.parameters())
    # each parameter owns its storage: the pickle carries the weights once, not the flat
    # training buffer once per parameter
    assert len(pickle.dumps(fitted.model)) < 2 * weights + 4096


def _pid_and_loaded(module: str) -> tuple[int, bool]:
    return os.getpid(), module in sys.modules


def test_calls_with_one_affinity_share_a_process_that_loads_their_modules():
    # A module the parent has not loaded: only the worker the affine calls go to loads it.
    module = "json.tool"
    assert module not in sys.modules
    jobs = Jobs(2, 1, processes=True)
    try:
        plain = [jobs.submit(_pid_and_loaded, module, cost=1.0) for _ in range(6)]
        affine = [
            jobs.submit(_pid_and_loaded, module, cost=2.0, affinity="json", modules=(module,))
            for _ in range(6)
        ]
        affine_pids = {f.result()[0] for f in affine}
        assert len(affine_pids) == 1 and all(f.result()[1] for f in affine)
        (loader,) = affine_pids
        others = [loaded for pid, loaded in (f.result() for f in plain) if pid != loader]
        assert others and not any(others)
        assert module not in sys.modules
    finally:
        jobs.close()


_POOLS_IN_A_WORKER = """
import json, sys
import threadpoolctl, torch
from galfast.audit.jobs import Jobs
def pool_threads():
    return {i["filepath"]: i["num_threads"] for i in threadpoolctl.threadpool_info()}
assert "sklearn" not in sys.modules
jobs = Jobs(2, 1, processes=True)
try:
    seen = jobs.submit(pool_threads, affinity="sk", modules=("sklearn.ensemble",)).result()
finally:
    jobs.close()
print(json.dumps([seen, "sklearn" in sys.modules]))
"""


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="pools default to one thread here")
def test_pools_a_worker_loads_for_a_call_are_limited():
    # In a fresh process: the worker loads scikit-learn (and the OpenMP and BLAS libraries it
    # brings, whose pools start at one thread per core) for the call, and limits them first.
    pytest.importorskip("sklearn")
    out = run_python(_POOLS_IN_A_WORKER)
    seen, parent_loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert any("scikit_learn" in path for path in seen)
    assert set(seen.values()) == {1} and not parent_loaded
