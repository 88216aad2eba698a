"""The audit's independent attacker fits, run on a few workers.

Every fit is keyed by its own seed (initialisation under :func:`seeded_init`, batch order and
trees from seeded generators) and reads nothing another fit writes, so the fits can run in
any order, on any thread or in any process: the results are the same as one after the other.
Where forking is safe the workers are forked processes (:mod:`galfast.audit.forked_workers`),
elsewhere threads, whose fits share the GIL for the Python between their ATen calls.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch
from threadpoolctl import threadpool_limits

from galfast.audit.forked_workers import ForkedWorkers, forking_is_safe, standby_workers
from galfast.audit.threads import attacker_threads, load_modules

__all__ = ["Jobs", "default_workers", "seeded_init"]

_INIT_LOCK = threading.Lock()
# Forked workers share nothing, so more cores finish the audit sooner until its longest chain
# of fits (the scikit-learn worker's) is all that is left: about 8 on a MovieLens-size audit.
# Thread workers share the GIL between their ATen calls: beyond 2 they mostly wait for it.
_MAX_DEFAULT_PROCESSES = 8
_MAX_DEFAULT_THREADS = 2


def default_workers(processes: bool = True) -> int:
    """The cores this process may run on, at most 8 forked workers (``processes``) or 2
    threads."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cap = _MAX_DEFAULT_PROCESSES if processes else _MAX_DEFAULT_THREADS
    return max(1, min(cores or 1, cap))


@contextmanager
def seeded_init(seed: int) -> Iterator[None]:
    """Runs the block (a model's construction) with torch's CPU generator seeded with
    ``seed``, restoring its state after; one thread at a time, since the generator is
    global."""
    with _INIT_LOCK, torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(seed)
        yield


class Jobs:
    """Runs ``submit``-ted calls on ``workers`` workers (``workers == 1``: at once, in the
    caller's thread; None: :func:`default_workers` of the kind picked; never more than
    ``most``, the calls to come, where given), each with ``threads`` intra-op threads in torch's
    and the native pools.

    A free worker takes the queued call with the largest ``cost`` (then the earliest): the
    audit hands out all its fits at once, and starting the longest first lets the workers
    finish together instead of one waiting on a long fit started last.

    Calls submitted with the same ``affinity`` all run on one worker, whichever takes the first
    of them (or, on forked workers, one that loaded their ``modules`` already: a standby worker,
    see :func:`~galfast.audit.forked_workers.start_standby`): while it is busy they wait, and
    the other workers leave them. It loads their ``modules`` first (and limits the native pools
    they bring): on forked workers one process imports what the others never need. (On
    threads the caller should load ``modules`` before ``attacker_threads`` limits the pools; a
    worker thread loads what is still missing.)

    ``processes``: whether the workers are forked processes (:mod:`galfast.audit.forked_workers`;
    no GIL shared between fits) or threads; None picks processes where forking is safe, or
    where standby workers forked before CUDA started are all the workers wanted. A
    process worker is forked at the first ``submit``; the calls and their arguments must then
    pickle (module-level functions, no closures)."""

    def __init__(
        self,
        workers: Optional[int],
        threads: int,
        processes: Optional[bool] = None,
        most: Optional[int] = None,
    ) -> None:
        if processes is None:
            # Forking now is safe, or it is not needed: standby workers forked before CUDA
            # started (a GPU run's, see forked_workers) are all the workers wanted.
            wanted = default_workers() if workers is None else workers
            wanted = wanted if most is None else min(wanted, most)
            processes = forking_is_safe(threads) or standby_workers(threads) >= wanted > 1
        if workers is None:
            workers = default_workers(processes)
        if most is not None:  # workers beyond the calls to come would only idle
            workers = max(1, min(workers, most))
        self._threads = threads
        self._pool: Optional[ThreadPoolExecutor] = None
        self._queue: list[_Call] = []
        self._queue_lock = threading.Lock()
        self._order = itertools.count()
        self._workers = workers
        self._free = list(range(workers))  # the workers not running a call
        self._bound: dict[str, int] = {}  # affinity -> its worker
        self._bound_work: dict[int, float] = {}  # worker -> the cost submitted bound to it
        self._limits: list = []  # native pools limited after a call loaded them
        self._processes = processes
        self._forked: Optional[ForkedWorkers] = None
        self._reserved: list[int] = []  # forked workers that came with modules loaded
        if workers > 1:
            self._pool = ThreadPoolExecutor(workers, thread_name_prefix="galfast-audit")

    @property
    def forks(self) -> bool:
        """Whether the workers are (or will be, at the first submit) forked processes."""
        return self._pool is not None and self._processes

    def submit(
        self,
        fn: Callable[..., Any],
        /,
        *args: Any,
        cost: float = 0.0,
        affinity: Optional[str] = None,
        modules: Sequence[str] = (),
        spread: Optional[str] = None,
        **kwargs: Any,
    ) -> Future:
        """``fn(*args, **kwargs)``'s future; ``cost``: its expected run time, in any unit
        shared by the calls (see :mod:`galfast.audit.job_costs`). ``spread``: where several
        forked workers loaded ``modules`` already (standby workers), calls of one
        ``affinity`` with different ``spread`` keys may run on different ones of them (those
        with the same key on one); elsewhere ``spread`` changes nothing, so no worker loads
        the modules only for them."""
        done: Future = Future()
        if self._pool is None:
            done.set_result(fn(*args, **kwargs))
            return done
        if self._processes and self._forked is None:
            # Forked before the pool's first thread starts: no worker thread can hold a lock
            # the children would inherit taken.
            try:
                self._forked = ForkedWorkers(self._workers, self._threads)
            except OSError:  # no fork possible or safe (a lost standby worker): threads do
                self._processes = False
            else:
                # Workers that loaded modules already are kept for the calls needing them.
                self._reserved = self._forked.preloaded()
        if affinity is not None and spread is not None and self._forked is not None:
            if len(self._forked.loaded_by(modules)) > 1:
                affinity = f"{affinity} {spread}"
        call = _Call(-cost, next(self._order), fn, args, kwargs, done, affinity, tuple(modules))
        with self._queue_lock:
            if affinity is not None and affinity not in self._bound and self._forked is not None:
                # A worker that loaded the modules already (a standby worker) takes these calls:
                # of several, the one with the least work bound to it so far.
                ready = self._forked.loaded_by(call.modules)
                if ready:
                    self._bound[affinity] = min(ready, key=lambda w: self._bound_work.get(w, 0))
            if affinity in self._bound:
                worker = self._bound[affinity]
                self._bound_work[worker] = self._bound_work.get(worker, 0.0) + cost
            self._queue.append(call)
        # One pool task per queued call, and one more after each call ends: a task runs the
        # costliest call a free worker may take then, or nothing.
        self._pool.submit(self._run_next)
        return done

    def _take(self) -> Optional[tuple[_Call, int]]:
        """The costliest queued call a free worker may run, and that worker (under the lock)."""
        if not self._free:
            return None
        # An unbound affinity (or none) may run on any free worker, a bound one on its own.
        runnable = [
            c for c in self._queue if self._bound.get(c.affinity, self._free[0]) in self._free
        ]
        if not runnable:
            return None
        call = min(runnable, key=lambda c: (c.rank, c.order))
        self._queue.remove(call)
        if call.affinity in self._bound:
            worker = self._bound[call.affinity]
        else:
            # Keep the workers that other calls are bound to (or loaded modules for) for those
            # calls while another is free.
            held = {*self._bound.values(), *self._reserved}
            unbound = [w for w in self._free if w not in held]
            worker = (unbound or self._free)[0]
            if call.affinity is not None:
                self._bound[call.affinity] = worker
        self._free.remove(worker)
        return call, worker

    def _run_next(self) -> None:
        with self._queue_lock:
            taken = self._take()
        if taken is None:
            return
        call, worker = taken
        try:
            if not call.done.set_running_or_notify_cancel():
                return
            try:
                result = self._call(call, worker)
            except BaseException as error:  # handed to whoever waits on the future
                call.done.set_exception(error)
            else:
                call.done.set_result(result)
        finally:
            with self._queue_lock:
                self._free.append(worker)
                self._free.sort()
                pending = bool(self._queue)
            if pending:  # a call waiting for this worker (its affinity) may run now
                self._pool.submit(self._run_next)

    def _call(self, call: _Call, worker: int) -> Any:
        if self._forked is not None:
            return self._forked.call(worker, call.fn, call.args, call.kwargs, call.modules)
        # OpenMP's thread count is per thread: set it in each worker, not only the caller.
        with attacker_threads(self._threads):
            if load_modules(call.modules):  # not loaded by the caller (a failed fork)
                with self._queue_lock:
                    self._limits.append(threadpool_limits(limits=self._threads))
            return call.fn(*call.args, **call.kwargs)

    def close(self) -> None:
        """Waits for the running calls, drops the queued ones (after an error) and ends the
        worker processes."""
        if self._pool is not None:
            with self._queue_lock:
                dropped, self._queue = self._queue, []
            for call in dropped:
                call.done.cancel()
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._forked is not None:
            self._forked.close()
            self._forked = None
        for limits in self._limits:
            limits.restore_original_limits()
        self._limits.clear()


@dataclass
class _Call:
    rank: float  # minus the cost: the smallest runs first
    order: int
    fn: Callable[..., Any]
    args: tuple
    kwargs: dict
    done: Future
    affinity: Optional[str]
    modules: tuple[str, ...]
