"""The audit's standby worker: forked early, it loads its modules while the parent works, and
the next ForkedWorkers with its thread count adopts it as worker 0, to which Jobs then sends
the calls needing those modules."""

from __future__ import annotations

import importlib
import os
import sys

import pytest

from galfast.audit import forked_workers
from galfast.audit.forked_workers import ForkedWorkers, discard_standby, start_standby
from galfast.audit.jobs import Jobs

pytestmark = pytest.mark.skipif(
    not forked_workers.forking_is_safe(), reason="fork: Linux without CUDA only"
)

# A small standard-library module this test process has not imported (so a child has it only
# if it loaded it itself).
MODULE = next(m for m in ("tabnanny", "pyclbr", "quopri", "colorsys") if m not in sys.modules)


def _pid_and_loaded(module: str) -> tuple[int, bool]:
    return os.getpid(), module in sys.modules


def _alive(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == 0


@pytest.fixture(autouse=True)
def _no_standby_left():
    assert MODULE not in sys.modules
    yield
    discard_standby()


def _standby_pid() -> int:
    return forked_workers._standby[0][0]


def test_the_standby_is_adopted_as_worker_0_with_its_modules_loaded():
    start_standby(1, (MODULE,))
    pid = _standby_pid()
    workers = ForkedWorkers(2, threads=1)
    try:
        assert forked_workers._standby == []
        assert workers.call(0, _pid_and_loaded, (MODULE,), {}) == (pid, True)
        other, loaded = workers.call(1, _pid_and_loaded, (MODULE,), {})
        assert other not in (pid, os.getpid()) and not loaded
        assert workers.loaded_by((MODULE,)) == [0] and workers.loaded_by(("json",)) == []
    finally:
        workers.close()
    assert not _alive(pid)


def test_standby_workers_run_one_thread_only():
    start_standby(2, (MODULE,))  # a forked child with a parallel region could hang
    assert forked_workers._standby == []
    start_standby(1, (MODULE,))
    pid = _standby_pid()
    with pytest.raises(OSError):  # workers of two threads: none adopted, none forked
        ForkedWorkers(2, threads=2)
    assert not _alive(pid) and forked_workers._standby == []


def test_starting_alike_keeps_the_standby_and_otherwise_replaces_it():
    start_standby(1, (MODULE,))
    first = _standby_pid()
    start_standby(1, (MODULE,))
    assert _standby_pid() == first
    start_standby(1, ("json",))
    assert _standby_pid() != first and not _alive(first)
    discard_standby()
    assert forked_workers._standby == []


def test_jobs_send_the_module_calls_to_the_worker_that_loaded_them():
    start_standby(1, (MODULE,))
    pid = _standby_pid()
    jobs = Jobs(2, 1, processes=True)
    try:
        # The first call needs nothing: the scheduler hands it to a worker no affinity holds.
        plain = jobs.submit(_pid_and_loaded, "json", cost=2.0)
        bound = [
            jobs.submit(_pid_and_loaded, MODULE, affinity="classic", modules=(MODULE,))
            for _ in range(3)
        ]
        assert {f.result()[0] for f in bound} == {pid}
        assert all(f.result()[1] for f in bound)
        assert plain.result()[0] != pid
    finally:
        jobs.close()


def test_spread_calls_share_the_workers_that_loaded_their_modules_by_key_and_cost(
    monkeypatch,
):
    # Two standby workers loaded the modules (a GPU run's): calls of one affinity with
    # different spread keys go to either, the costliest key first to the least loaded one;
    # calls of one key stay on one worker. No new fork is needed (4 workers on standby).
    start_standby(1, (MODULE,), count=4, loaders=2)
    assert [entry[3] for entry in forked_workers._standby] == [(MODULE,)] * 2 + [()] * 2
    loaders = [entry[0] for entry in forked_workers._standby[:2]]
    _no_more_forks(monkeypatch)
    jobs = Jobs(4, 1, processes=True)
    try:
        spread = {
            key: [
                jobs.submit(
                    _pid_and_loaded,
                    MODULE,
                    cost=cost,
                    affinity="classic",
                    modules=(MODULE,),
                    spread=key,
                )
                for _ in range(2)
            ]
            for key, cost in (("a", 5.0), ("b", 4.0), ("c", 1.0))
        }
        pids = {key: {f.result()[0] for f in futures} for key, futures in spread.items()}
        assert all(len(p) == 1 for p in pids.values())  # one worker per key
        assert pids["a"] != pids["b"] and pids["a"] | pids["b"] == set(loaders)
        assert pids["c"] == pids["b"]  # the worker with less bound to it (4 + 4 < 5 + 5)
        assert all(f.result()[1] for futures in spread.values() for f in futures)
    finally:
        jobs.close()


def test_spread_changes_nothing_where_one_worker_loaded_the_modules():
    start_standby(1, (MODULE,), count=1)
    pid = _standby_pid()
    jobs = Jobs(2, 1, processes=True)
    try:
        futures = [
            jobs.submit(_pid_and_loaded, MODULE, affinity="classic", modules=(MODULE,), spread=k)
            for k in "abc"
        ]
        assert {f.result() for f in futures} == {(pid, True)}
    finally:
        jobs.close()


def _no_more_forks(monkeypatch):
    """From now on a fork fails the test: the workers must all come from standby."""

    def refuse(threads):
        raise AssertionError("forked after the standby workers")

    monkeypatch.setattr(forked_workers, "_fork_worker", refuse)


def test_all_workers_on_standby_are_adopted_in_order_and_none_forked(monkeypatch):
    # A GPU run's audit: every worker forked before CUDA started, only the first loads modules.
    start_standby(1, (MODULE,), count=2)
    pids = [entry[0] for entry in forked_workers._standby]
    assert [entry[3] for entry in forked_workers._standby] == [(MODULE,), ()]
    assert forked_workers.standby_workers(1) == 2 and forked_workers.standby_workers(2) == 0
    _no_more_forks(monkeypatch)
    workers = ForkedWorkers(2, threads=1)
    try:
        assert forked_workers._standby == []
        assert workers.call(0, _pid_and_loaded, (MODULE,), {}) == (pids[0], True)
        assert workers.call(1, _pid_and_loaded, (MODULE,), {}) == (pids[1], False)
        assert workers.preloaded() == [0]
    finally:
        workers.close()
    assert not any(_alive(pid) for pid in pids)


def test_standby_workers_beyond_the_count_are_ended():
    start_standby(1, (MODULE,), count=2)
    pids = [entry[0] for entry in forked_workers._standby]
    workers = ForkedWorkers(1, threads=1)
    try:
        assert forked_workers._standby == [] and not _alive(pids[1])
        assert workers.call(0, _pid_and_loaded, (MODULE,), {}) == (pids[0], True)
    finally:
        workers.close()


def test_jobs_take_processes_after_cuda_started_only_from_enough_standby_workers(monkeypatch):
    # Forking is refused (as once CUDA has started): processes only where standby workers
    # cover every worker wanted, and then no fork happens.
    jobs_module = importlib.import_module("galfast.audit.jobs")  # galfast.audit.audit shadows
    monkeypatch.setattr(jobs_module, "forking_is_safe", lambda threads=1: False)
    start_standby(1, (MODULE,), count=1)
    assert not Jobs(2, 1).forks
    start_standby(1, (MODULE,), count=2)
    assert not Jobs(2, 2).forks  # another thread count: not adoptable
    pids = {entry[0] for entry in forked_workers._standby}
    _no_more_forks(monkeypatch)
    jobs = Jobs(2, 1)
    try:
        assert jobs.forks
        futures = [jobs.submit(_pid_and_loaded, "json", cost=1.0) for _ in range(4)]
        assert {f.result()[0] for f in futures} <= pids
    finally:
        jobs.close()


def test_a_lost_standby_worker_after_cuda_started_means_threads(monkeypatch):
    # One of two standby workers dies; forking is refused (CUDA started): the workers are
    # not completed by a fork, the adopted one is ended, and the jobs run on threads.
    jobs_module = importlib.import_module("galfast.audit.jobs")
    start_standby(1, (MODULE,), count=2)
    pids = [entry[0] for entry in forked_workers._standby]
    os.kill(pids[1], 9)
    monkeypatch.setattr(forked_workers, "forking_is_safe", lambda threads=1: False)
    monkeypatch.setattr(jobs_module, "forking_is_safe", lambda threads=1: False)
    _no_more_forks(monkeypatch)
    jobs = Jobs(2, 1)
    try:
        assert jobs.forks  # two standby workers were there when the jobs were made
        result = jobs.submit(_pid_and_loaded, "json", cost=1.0).result()
        assert result[0] == os.getpid() and not jobs.forks
    finally:
        jobs.close()
    assert not any(_alive(pid) for pid in pids)
