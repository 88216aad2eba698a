"""The audit's independent attacker fits, run on a few threads.

Every fit is keyed by its own seed (initialisation under :func:`seeded_init`, batch order and
trees from seeded generators) and reads nothing another fit writes, so the fits can run in
any order and on any thread: the results are the same as one after the other. The heavy part
of a fit (matrix products, the autograd engine, scikit-learn's loops) runs without the GIL,
so a second thread keeps a second core busy.
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
    """Runs ``submit``-ted calls on ``workers`` threads (``workers == 1``: at once, in the
    caller's thread), each with ``threads`` intra-op threads in torch's and the native pools.

    A free worker takes the queued call with the largest ``cost`` (then the earliest): the
    audit hands out all its fits at once, and starting the longest first lets the workers
    finish together instead of one waiting on a long fit started last."""

    def __init__(self, workers: int, threads: int) -> None:
        self._threads = threads
        self._pool: Optional[ThreadPoolExecutor] = None
        self._queue: list[tuple[float, int, Callable[..., Any], tuple, dict, Future]] = []
        self._queue_lock = threading.Lock()
        self._order = itertools.count()
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
            # OpenMP's thread count is per thread: set it in each worker, not only the caller.
            with attacker_threads(self._threads):
                result = fn(*args, **kwargs)
        except BaseException as error:  # handed to whoever waits on the future
            done.set_exception(error)
        else:
            done.set_result(result)

    def close(self) -> None:
        """Waits for the running calls and drops the queued ones (after an error)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            with self._queue_lock:
                for *_, done in self._queue:
                    done.cancel()
                self._queue.clear()
