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

Forking is used only where it is safe: on Linux, for CPU fits, before CUDA is initialised
(a forked child cannot use the parent's CUDA context).
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

__all__ = ["ForkedWorkers", "forking_is_safe"]


def forking_is_safe() -> bool:
    """Whether worker processes may be forked here: Linux, and no CUDA context yet."""
    return sys.platform.startswith("linux") and not torch.cuda.is_initialized()


class ForkedWorkers:
    """``count`` forked processes, numbered from 0, running ``call``-ed functions with
    ``threads`` intra-op threads each. Calls to different workers may run at once from
    different threads; one worker takes one call at a time (the caller keeps to that)."""

    def __init__(self, count: int, threads: int) -> None:
        self._workers: list[tuple[int, Connection]] = []
        try:
            for _ in range(count):
                self._workers.append(_fork_worker(threads))
        except BaseException:
            self.close()
            raise

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
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        self._workers.clear()


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
