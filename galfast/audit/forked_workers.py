"""The audit's attacker fits in forked worker processes.

A fit is a few thousand small ATen calls with Python between them. The calls release the GIL,
the Python does not, so two fits on two threads wait for each other's Python: the strong
audit of a MovieLens run kept about 1.45 of two cores busy. Forked processes share no GIL.
They are forked once, when the audit hands out its first fit (after the model, the embeddings
and scikit-learn are loaded, so a child inherits them instead of loading them again), and each
then runs the fits it is sent: the function and its arguments pickled, the result (or the
exception) pickled back. The fits are the same calls with the same seeds and thread count, so
the results are the same as on threads, bit for bit.

A call may name modules its worker must load first (scikit-learn for the classic attackers,
about a second and a half of CPU): the worker imports them and then limits the native thread
pools they bring, as ``attacker_threads`` does for the pools loaded before it. The audit sends
all such fits to one worker, so one process pays for the import while the other fits.

A run may start workers early, on standby (:func:`start_standby`): forked before the run
builds its dataset, the first imports scikit-learn on the core that the dataset's generation
leaves idle, and the audit's ForkedWorkers adopts them (with the same thread count) as its
first workers, worker 0 taking the calls needing those modules. The fits they run are the same
pickled calls, so nothing in the results depends on them.

Forking is used only where it is safe: on Linux, for CPU fits on one intra-op thread each (GNU
OpenMP's pool does not survive a fork), before CUDA is initialised (a forked child cannot use
the parent's CUDA context, and freeing an inherited CUDA tensor there would call into it). A
GPU run therefore starts all its audit workers on standby, before CUDA starts; the audit then
adopts them and forks none.
"""

from __future__ import annotations

import os
import pickle
import sys
import traceback
import warnings
from collections.abc import Sequence
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from typing import Any, Callable

import torch
from threadpoolctl import threadpool_limits

from galfast.audit.threads import attacker_threads, load_modules

__all__ = [
    "ForkedWorkers",
    "discard_standby",
    "forking_is_safe",
    "standby_workers",
    "start_standby",
]


def forking_is_safe(threads: int = 1) -> bool:
    """Whether workers with ``threads`` intra-op threads may be forked here: Linux, no CUDA
    context yet, and one thread. GNU OpenMP (torch's, MKL's and galfast's pool on Linux) does
    not survive a fork: once the parent has run a parallel region, a child's own first one
    waits forever for pool threads that stayed in the parent. One thread runs none."""
    return sys.platform.startswith("linux") and not torch.cuda.is_initialized() and threads == 1


class ForkedWorkers:
    """``count`` forked processes, numbered from 0, running ``call``-ed functions with
    ``threads`` intra-op threads each: the standby workers with that thread count first (see
    :func:`start_standby`), then new ones, forked now: OSError where :func:`forking_is_safe`
    says no. Calls to different workers may run at once from different threads; one worker
    takes one call at a time (the caller keeps to that)."""

    def __init__(self, count: int, threads: int) -> None:
        self._workers: list[tuple[int, Connection]] = []
        self._loaded: list[tuple[str, ...]] = []  # the modules each worker loaded
        try:
            for pid, conn, modules in _adopt_standby(threads, count):
                self._workers.append((pid, conn))
                self._loaded.append(modules)
            while len(self._workers) < count:
                if not forking_is_safe(threads):  # e.g. a standby worker lost after CUDA started
                    raise OSError("an audit worker is missing and forking is unsafe now")
                self._workers.append(_fork_worker(threads))
                self._loaded.append(())
        except BaseException:
            self.close()
            raise

    def preloaded(self) -> list[int]:
        """The workers that came with modules loaded (an adopted standby worker)."""
        return [worker for worker, loaded in enumerate(self._loaded) if loaded]

    def loaded_by(self, modules: Sequence[str]) -> list[int]:
        """The workers that have loaded every one of ``modules`` already (adopted standby
        workers), in order; none for no modules."""
        wanted = set(modules)
        return [w for w, loaded in enumerate(self._loaded) if wanted and wanted <= set(loaded)]

    def call(
        self,
        worker: int,
        fn: Callable[..., Any],
        args: tuple,
        kwargs: dict,
        modules: Sequence[str] = (),
    ) -> Any:
        """``fn(*args, **kwargs)`` in worker ``worker``, after it has loaded ``modules``: its
        result, or its exception raised here."""
        request = (tuple(modules), fn, args, kwargs)
        payload = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        pid, conn = self._workers[worker]
        try:
            conn.send_bytes(payload)
            ok, value = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError) as error:
            raise RuntimeError(
                f"an audit worker process (pid {pid}) died while fitting an attacker"
            ) from error
        if not ok:
            raise value
        return value

    def close(self) -> None:
        """Ends the workers (each sees its pipe close) and reaps them."""
        for _, conn in self._workers:
            conn.close()
        for pid, _ in self._workers:
            _reap(pid)
        self._workers.clear()
        self._loaded.clear()


# The workers on standby, in order: (pid, pipe, threads, modules) each.
_standby: list[tuple[int, Connection, int, tuple[str, ...]]] = []


def start_standby(threads: int, modules: Sequence[str], count: int = 1, loaders: int = 1) -> None:
    """Forks ``count`` workers with ``threads`` intra-op threads now; the first ``loaders`` of
    them load ``modules`` at once while the caller goes on. The next :class:`ForkedWorkers`
    with that thread count adopts them. Keeps standby workers started alike, replaces others;
    does nothing where forking is unsafe, and keeps the workers forked so far where a fork
    fails."""
    loaders = min(loaders, count)
    wanted = [(threads, tuple(modules))] * loaders + [(threads, ())] * (count - loaders)
    if [entry[2:] for entry in _standby] == wanted:
        return
    discard_standby()
    if not forking_is_safe(threads):
        return
    for its_threads, its_modules in wanted:
        try:
            pid, conn = _fork_worker(its_threads)
        except OSError:  # no memory or process left: the audit forks its workers later
            return
        request = (its_modules, _nothing_more, (), {})
        conn.send_bytes(pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL))
        _standby.append((pid, conn, its_threads, its_modules))


def standby_workers(threads: int) -> int:
    """How many workers with ``threads`` threads are on standby."""
    return sum(entry[2] == threads for entry in _standby)


def discard_standby() -> None:
    """Ends the standby workers, if any."""
    while _standby:
        pid, conn, _, _ = _standby.pop()
        conn.close()
        _reap(pid)


def _adopt_standby(threads: int, count: int) -> list[tuple[int, Connection, tuple[str, ...]]]:
    """Up to ``count`` standby workers (pid, pipe, modules), in their order, each once its
    loading is done, if it has ``threads`` threads and loaded its modules; the others are
    ended. None are left on standby."""
    adopted = []
    while _standby:
        pid, conn, its_threads, modules = _standby.pop(0)
        if its_threads == threads and len(adopted) < count:
            try:
                ok, _ = pickle.loads(conn.recv_bytes())  # waits for the import if still running
            except (EOFError, OSError):
                ok = False
            if ok:
                adopted.append((pid, conn, modules))
                continue
        conn.close()
        _reap(pid)
    return adopted


def _nothing_more() -> None:
    """The standby worker's first call: nothing beyond loading its modules."""


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _fork_worker(threads: int) -> tuple[int, Connection]:
    ours, theirs = Pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns on fork in a process with threads (torch's OpenMP pool, a progress
        # bar's monitor): the children only run the fits they are sent, on their own thread.
        warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: serve until the parent closes the pipe, then leave at once
        code = 1
        try:
            ours.close()
            _serve(theirs, threads)
            code = 0
        finally:
            os._exit(code)  # no atexit handlers, no flushing of the parent's buffers
    theirs.close()
    return pid, ours


def _serve(conn: Connection, threads: int) -> None:
    limits = []  # the native pools' limits, kept for the process's life
    with attacker_threads(threads):
        while True:
            try:
                request = conn.recv_bytes()
            except EOFError:
                return
            try:
                modules, fn, args, kwargs = pickle.loads(request)
                if load_modules(modules):
                    limits.append(threadpool_limits(limits=threads))
                reply: tuple[bool, Any] = (True, fn(*args, **kwargs))
            except BaseException as error:  # handed to the caller
                reply = (False, error)
            conn.send_bytes(_pickled_reply(reply))


def _pickled_reply(reply: tuple[bool, Any]) -> bytes:
    try:
        return pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        what = "exception" if not reply[0] else "result"
        detail = "".join(traceback.format_exception(reply[1])) if not reply[0] else ""
        error = RuntimeError(f"an audit worker could not send back its {what}\n{detail}")
        return pickle.dumps((False, error))
