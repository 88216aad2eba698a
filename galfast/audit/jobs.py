"""The audit's independent attacker fits, run on a few workers.

Every fit is keyed by its own seed (initialisation under :func:`seeded_init`, batch order and
trees from seeded generators) and reads nothing another fit writes, so the fits can run in
any order, on any thread or in any process: the results are the same as one after the other.
Where forking is safe the workers are forked processes (:mod:`galfast.audit.forked_workers`),
elsewhere threads, whose fits share the GIL for the Python between their ATen calls.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Optional

import torch

from galfast.audit.forked_workers import ForkedWorkers, forking_is_safe
from galfast.audit.threads import attacker_threads

__all__ = ["Jobs", "default_workers", "seeded_init"]

_INIT_LOCK = threading.Lock()
_MAX_DEFAULT_WORKERS = 2


def default_workers() -> int:
    """The cores this process may run on, at most 2."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cores or 1, _MAX_DEFAULT_WORKERS))


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
    caller's thread), each with ``threads`` intra-op threads in torch's and the native pools.

    A free worker takes the queued call with the largest ``cost`` (then the earliest): the
    audit hands out all its fits at once, and starting the longest first lets the workers
    finish together instead of one waiting on a long fit started last.

    ``processes``: whether the workers are forked processes (:mod:`galfast.audit.forked_workers`;
    no GIL shared between fits) or threads; None picks processes where forking is safe. A
    process worker is forked at the first ``submit``; the calls and their arguments must then
    pickle (module-level functions, no closures)."""

    def __init__(self, workers: int, threads: int, processes: Optional[bool] = None) -> None:
        self._threads = threads
        self._pool: Optional[ThreadPoolExecutor] = None
        self._queue: list[tuple[float, int, Callable[..., Any], tuple, dict, Future]] = []
        self._queue_lock = threading.Lock()
        self._order = itertools.count()
        self._workers = workers
        self._processes = forking_is_safe() if processes is None else processes
        self._forked: Optional[ForkedWorkers] = None
        if workers > 1:
            self._pool = ThreadPoolExecutor(workers, thread_name_prefix="galfast-audit")

    def submit(
        self, fn: Callable[..., Any], /, *args: Any, cost: float = 0.0, **kwargs: Any
    ) -> Future:
        """``fn(*args, **kwargs)``'s future; ``cost``: its expected run time, in any unit
        shared by the calls (see :mod:`galfast.audit.job_costs`)."""
        done: Future = Future()
        if self._pool is None:
            done.set_result(fn(*args, **kwargs))
            return done
        if self._processes and self._forked is None:
            # Forked before the pool's first thread starts: no worker thread can hold a lock
            # the children would inherit taken.
            try:
                self._forked = ForkedWorkers(self._workers, self._threads)
            except OSError:  # no memory or process left to fork: threads give the same
                self._processes = False
        with self._queue_lock:
            heapq.heappush(self._queue, (-cost, next(self._order), fn, args, kwargs, done))
        # One pool task per queued call: each runs whichever call is the costliest then.
        self._pool.submit(self._run_next)
        return done

    def _run_next(self) -> None:
        with self._queue_lock:
            *_, fn, args, kwargs, done = heapq.heappop(self._queue)
        if not done.set_running_or_notify_cancel():
            return
        try:
            result = self._call(fn, args, kwargs)
        except BaseException as error:  # handed to whoever waits on the future
            done.set_exception(error)
        else:
            done.set_result(result)

    def _call(self, fn, args, kwargs):
        if self._forked is not None:
            return self._forked.call(fn, args, kwargs)
        # OpenMP's thread count is per thread: set it in each worker, not only the caller.
        with attacker_threads(self._threads):
            return fn(*args, **kwargs)

    def close(self) -> None:
        """Waits for the running calls, drops the queued ones (after an error) and ends the
        worker processes."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            with self._queue_lock:
                for *_, done in self._queue:
                    done.cancel()
                self._queue.clear()
        if self._forked is not None:
            self._forked.close()
            self._forked = None
