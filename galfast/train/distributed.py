"""Data-parallel GAL on ``torch.distributed``: each process trains on its share of every
global batch and the gradients of all modules are averaged before each optimizer step.

Launch with ``torchrun --nproc_per_node=N your_script.py`` (gloo on CPU, NCCL on GPU); the
script calls :func:`init_distributed` and builds its ``GALTrainer`` as usual, which finds the
process group. What each step does (the gradient averaging of PyTorch's DDP, as one
``all_reduce`` per optimizer step):

- Every process iterates the same global task batches and takes a contiguous share of each
  batch's items; the adversary batch (and its walks) is drawn identically on every process,
  which takes its share of the attacked nodes. Each process samples the computation graph of
  its share only; a node draws the same neighbours whichever process samples it.
- Each process scales its loss by (its items / global items) x world size, so the averaged
  gradient is the gradient of the global batch's mean loss: the same step as one process
  with the whole batch (the task loss must be a mean over the batch's items, as the
  ready-made losses are).
- ``fit`` checks, when it starts, that every process was given the same settings, module
  shapes, graph, features, attributes, epochs, optimizer states and task batches (their
  type, length, tensor attributes and first batch; by fingerprints, :func:`fingerprint`):
  processes with other data raise ValueError together instead of averaging their gradients
  into a run of neither, and a process that fails its own checks there fails the others
  (:class:`PeerFailed`), as does one whose callbacks fail (their ``on_fit_start``, or an
  ``on_epoch_end`` at the exchange that ends every epoch). Batches of a type of your own
  that differ only after the first, or yield another number of batches without a ``len``,
  go unnoticed. The trainer's own collectives (and the BatchNorm reductions of
  :mod:`galfast.nn.sync_batch_norm`) carry the name of their operation, so a process that
  stops alone raises instead of waiting for the others forever, and a collective that fails
  or times out (a process failed mid-epoch) names the operation and this process.
- Parameters and buffers are broadcast from rank 0 when ``fit`` starts; every process then
  takes the same optimizer steps, so encoder, task head, attackers and both optimizers stay
  identical everywhere. Buffers that each process moves by its own share (the running
  statistics of a torch BatchNorm in the task head or an attacker, such as ConvE's) are
  taken from rank 0 at the end of every epoch, as DDP takes them before every forward.
  Checkpoints are written by rank 0 alone, which waits for no one (it posts its outcome in
  the process group's store for the processes that wait for the file), and load on any
  number of processes.
- The encoder's :class:`galfast.nn.BatchNorm` layers take their batch statistics over the
  rows of every process (:mod:`galfast.nn.sync_batch_norm`, entered by the sampled encoding),
  so their running buffers stay identical too; a process without rows in a step still runs
  the encoder on zero rows. A node sampled by two processes counts twice in those statistics,
  so with BatchNorm a step is close to, not exactly, the one-process step. torch's own
  ``BatchNorm1d/2d/3d`` in the encoder are refused when ``fit`` starts.

Why not wrap the modules in ``DistributedDataParallel``: a GAL step calls the encoder for the
task and again for the adversary, with a set of attackers that varies with the batch, and a
process whose share holds no known value of an attribute skips that attacker; DDP's reducer
expects every process to run the same forward and would wait forever there.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import math
import os
from collections.abc import Iterable, Sequence
from typing import Any, Optional, Union

import torch
import torch.distributed as dist
from torch import Tensor, nn

from galfast.nn.sync_batch_norm import named_collective

__all__ = ["PeerFailed", "ProcessGroup", "batch_values", "fingerprint", "init_distributed"]

# splitmix64's golden-ratio multiplier as an int64: fingerprints multiply and add modulo 2**64
# (int64 arithmetic wraps), so they are exact and independent of the order a device adds in.
_GOLDEN = 0x9E3779B97F4A7C15 - 2**64
_FINGERPRINT_MASK = 2**62 - 1  # non-negative, so that its negation fits an int64 too
_FINGERPRINT_CHUNK = 1 << 20  # words hashed at a time: bounds the int64 workspace
_STORE_PREFIX = "galfast/"
_BATCH_DEPTH = 4
_LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def init_distributed(
    backend: Optional[str] = None, timeout: Union[datetime.timedelta, float, None] = None
) -> torch.device:
    """Joins the process group ``torchrun`` describes (``RANK``, ``WORLD_SIZE``,
    ``MASTER_ADDR``...) and returns this process's device: ``cuda:LOCAL_RANK`` with NCCL when
    CUDA is available, else the CPU with gloo. Without torchrun's variables it starts nothing
    and returns the default device (a one-process run).

    ``timeout`` (a ``timedelta`` or seconds; None: torch's default, 30 minutes) bounds how long
    a process waits for the others: to join the group here (a :class:`TimeoutError` names
    this process, the world size and the address it waited at), and in every collective
    afterwards (a process whose peers failed or stopped raises after it instead of hanging)."""
    timeout = _check_timeout(timeout)
    launched = "WORLD_SIZE" in os.environ
    rank, world_size, address = _launch_environment() if launched else (0, 1, "")
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else None
    if device is not None:
        torch.cuda.set_device(device)
    if not launched or dist.is_initialized():
        return device or torch.device("cpu")
    try:
        dist.init_process_group(backend or ("nccl" if cuda else "gloo"), timeout=timeout)
    except dist.DistError as error:
        waited = timeout or dist.distributed_c10d.default_pg_timeout
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        # A port that another program holds fails at once: no TimeoutError for that one.
        timed_out = "timed out" in str(error).lower() or "timeout" in str(error).lower()
        raise (TimeoutError if timed_out else RuntimeError)(
            f"process {rank} of {world_size} could not join the process group at {address} "
            f"(waited up to {waited}): not every process reached init_distributed() (one "
            "failed to start, or runs with another WORLD_SIZE or MASTER_ADDR/MASTER_PORT?). "
            f"torch: {reason}"
        ) from error
    return device or torch.device("cpu")


def _check_timeout(timeout: Any) -> Optional[datetime.timedelta]:
    if timeout is None or isinstance(timeout, datetime.timedelta):
        seconds = None if timeout is None else timeout.total_seconds()
    elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        seconds = float(timeout)
    else:
        raise ValueError(
            f"timeout must be a datetime.timedelta or a number of seconds, got {timeout!r}"
        )
    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"timeout must be a positive, finite duration, got {timeout!r}")
    return None if seconds is None else datetime.timedelta(seconds=seconds)


def _launch_environment() -> tuple[int, int, str]:
    """``(rank, world size, "MASTER_ADDR:MASTER_PORT")`` from torchrun's variables; ValueError
    naming what is missing or not a number (torch would name one variable at a time)."""
    missing = [name for name in _LAUNCH_VARIABLES if not os.environ.get(name)]
    if missing:
        raise ValueError(
            f"WORLD_SIZE is set but {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
            f"not: a multi-process run needs {', '.join(_LAUNCH_VARIABLES)} (torchrun sets "
            "them all; unset WORLD_SIZE to run one process)"
        )
    numbers = {}
    for name in ("RANK", "WORLD_SIZE", "MASTER_PORT", "LOCAL_RANK"):
        text = os.environ.get(name, "0")
        if not text.strip().isdigit():
            raise ValueError(f"{name} must be a non-negative integer, got {text!r}")
        numbers[name] = int(text)
    rank, world_size = numbers["RANK"], numbers["WORLD_SIZE"]
    if world_size < 1 or rank >= world_size:
        raise ValueError(
            f"RANK must lie in [0, WORLD_SIZE), got RANK={rank} WORLD_SIZE={world_size}"
        )
    return rank, world_size, f"{os.environ['MASTER_ADDR']}:{numbers['MASTER_PORT']}"


class PeerFailed(ValueError):
    """Another process raised where this one did not (its own error says why)."""


class ProcessGroup:
    """This process's place among the trainer's processes (one process: rank 0 of 1, and
    every collective is the identity)."""

    def __init__(self, rank: int = 0, world_size: int = 1) -> None:
        self.rank, self.world_size = rank, world_size

    @classmethod
    def detect(cls) -> ProcessGroup:
        """The initialised default process group, if any."""
        if dist.is_available() and dist.is_initialized():
            return cls(dist.get_rank(), dist.get_world_size())
        return cls()

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    def share(self, count: int) -> tuple[int, int]:
        """``(start, stop)`` of this process's contiguous share of ``count`` items."""
        return count * self.rank // self.world_size, count * (self.rank + 1) // self.world_size

    def sum(self, values: Tensor, operation: str = "fit (a sum over the processes)") -> Tensor:
        """The elementwise sum of ``values`` over all processes."""
        if self.enabled:
            values = values.clone()
            with self._collective(operation):
                dist.all_reduce(values)
        return values

    def _collective(self, operation: str) -> contextlib.AbstractContextManager[None]:
        """A failing collective names ``operation`` and this process (see
        :func:`~galfast.nn.sync_batch_norm.named_collective`)."""
        return named_collective(operation, self.rank, self.world_size)

    def average_gradients(self, parameters: Iterable[nn.Parameter]) -> None:
        """Replaces each gradient by its mean over the processes, in one all_reduce. A
        parameter no process gave a gradient keeps None (the optimizer skips it, as in a
        one-process run); one that some processes left None counts zeros there."""
        if not self.enabled:
            return
        params = list(parameters)
        if not params:
            return
        reference = params[0]
        flat = [
            p.grad.reshape(-1) if p.grad is not None else reference.new_zeros(p.numel())
            for p in params
        ]
        flags = torch.tensor(
            [p.grad is not None for p in params], dtype=reference.dtype, device=reference.device
        )
        buffer = self.sum(torch.cat([*flat, flags]), "fit (the gradient averaging of a step)")
        grads, used = buffer[: -len(params)], buffer[-len(params) :]
        start = 0
        for p, was_used in zip(params, used.tolist()):
            grad = grads[start : start + p.numel()].view_as(p) / self.world_size
            start += p.numel()
            if was_used:
                p.grad = grad.to(p.dtype)

    def broadcast(self, modules: Sequence[Optional[nn.Module]]) -> None:
        """Copies rank 0's parameters and buffers into every process (as DDP does when built)."""
        self._from_rank_zero(
            tensor for m in _modules(modules) for tensor in [*m.parameters(), *m.buffers()]
        )

    def broadcast_buffers(self, modules: Sequence[Optional[nn.Module]]) -> None:
        """Copies rank 0's buffers into every process. A torch BatchNorm in a task head or an
        attacker moves its running statistics by its own process's share of each batch, so
        they drift apart between processes; DDP takes rank 0's before every forward, the
        trainer at the end of every epoch (before anything evaluates or saves them)."""
        self._from_rank_zero(tensor for m in _modules(modules) for tensor in m.buffers())

    def _from_rank_zero(self, tensors: Iterable[Tensor]) -> None:
        if not self.enabled:
            return
        with torch.no_grad(), self._collective("fit (rank 0's parameters and buffers)"):
            for tensor in tensors:
                dist.broadcast(tensor.data, src=0)

    def publish(self, key: str, message: str) -> None:
        """Posts ``message`` under ``key`` for :meth:`wait_for` on the other processes, without
        waiting for them (rank 0 alone may call it)."""
        if self.enabled:
            _store().set(_STORE_PREFIX + key, message)

    def wait_for(self, key: str, operation: str) -> str:
        """The message rank 0 publishes under ``key``, once it has (a TimeoutError after the
        process group's timeout names ``operation``)."""
        try:
            _store().wait([_STORE_PREFIX + key])
            return _store().get(_STORE_PREFIX + key).decode()
        except RuntimeError as error:  # torch's DistStoreError, or a store that went away
            raise TimeoutError(
                f"process {self.rank} of {self.world_size} waited in {operation} for rank 0, "
                "which did not do the same within the process group's timeout (rank 0 did not "
                f"call it, or failed). torch: {str(error).strip().splitlines()[0]}"
            ) from error

    def any(
        self,
        flag: bool,
        operation: str,
        device: torch.device,
        failure: Optional[Exception] = None,
    ) -> bool:
        """True in every process when ``flag`` is True in one of them. ``failure``, this
        process's error before the exchange (a callback's), is raised here once the others
        know of it, in the same all_reduce: they raise :class:`PeerFailed` naming this process
        instead of waiting for it in their next collective."""
        first_failed = self.world_size if failure is None else self.rank
        highest, lowest = self._exchange(operation, [int(flag), first_failed], device)
        self._raise_failures(failure, lowest[1], operation, "every process stopped there")
        return bool(highest[0])

    def differing(
        self,
        fingerprints: dict[str, Tensor],
        operation: str,
        failed: bool = False,
        device: Optional[torch.device] = None,
    ) -> list[str]:
        """The names whose :func:`fingerprint` is not the same in every process (in every
        process; one all_reduce when all agree). A process that ``failed`` before it could
        compare still joins, so that the others raise with it instead of waiting for it: every
        process but the failed ones raises :class:`PeerFailed`. ``device``: where the
        collective runs when there are no fingerprints (a failed process; NCCL reduces no
        CPU tensor), by default the CPU."""
        if not self.enabled:
            return []
        if device is None:
            device = (
                next(iter(fingerprints.values())).device if fingerprints else torch.device("cpu")
            )
        values = torch.stack(list(fingerprints.values())) if fingerprints else None
        combined = 0 if values is None else int(fingerprint([values], device))
        first_failed = self.rank if failed else self.world_size
        mine = [len(fingerprints), combined, first_failed]
        highest, lowest = self._exchange(operation, mine, device)
        if not failed:
            self._raise_failures(None, lowest[2], operation, "no process trained")
        if failed or highest == lowest:
            return []
        if highest[0] != lowest[0]:
            return list(fingerprints)  # other entries altogether (another set of attributes)
        highest, lowest = self._exchange(operation, values.tolist(), values.device)
        return [name for name, high, low in zip(fingerprints, highest, lowest) if high != low]

    def _raise_failures(
        self, failure: Optional[Exception], first_failed: int, operation: str, outcome: str
    ) -> None:
        """Raises this process's ``failure``, else :class:`PeerFailed` when ``first_failed``
        (the lowest rank that failed; ``world_size``: none) names another process."""
        if failure is not None:
            raise failure
        if first_failed < self.world_size:
            raise PeerFailed(
                f"process {first_failed} of {self.world_size} failed in {operation} (its own "
                f"error says why): {outcome}"
            )

    def _exchange(
        self, operation: str, values: list[int], device: torch.device
    ) -> tuple[list[int], list[int]]:
        """The highest and lowest of each of ``values`` (ints in ``[0, 2**62)``) over the
        processes, which must all be in ``operation``: the name's fingerprint travels with
        them, so a process that runs another operation (a checkpoint that one process alone
        saves) raises in every process involved instead of waiting for the others forever."""
        if not self.enabled:
            return values, values
        tag = _text_fingerprint(operation) & _FINGERPRINT_MASK
        both = torch.tensor([tag, *values], dtype=torch.int64, device=device)
        both = torch.cat([both, -both])
        with self._collective(operation):
            dist.all_reduce(both, op=dist.ReduceOp.MAX)  # the maxima, and minus the minima
        highest, lowest = both[: len(values) + 1].tolist(), (-both[len(values) + 1 :]).tolist()
        if highest[0] != lowest[0]:
            raise ValueError(
                f"this process called {operation} while another process called something else:"
                " every process must make the same calls (save_checkpoint too: rank 0 writes, "
                "the others wait) and run the same callbacks"
            )
        return highest[1:], lowest[1:]

    def same_as(self, other: ProcessGroup) -> bool:
        return (self.rank, self.world_size) == (other.rank, other.world_size)


def fingerprint(values: Sequence[Any], device: torch.device) -> Tensor:
    """An int64 0-d tensor on ``device`` that differs, but for a 2**-62 chance, between two
    sequences of tensors (their shapes, dtypes and bytes) and plain values (their repr)."""
    total = torch.zeros((), dtype=torch.int64, device=device)
    for index, value in enumerate(values):
        if isinstance(value, Tensor):
            description = f"{index} {tuple(value.shape)} {value.dtype}"
            part = _bytes_fingerprint(value.to(device)) + _text_fingerprint(description)
        else:
            part = _text_fingerprint(f"{index} {value!r}")
        total = total * _GOLDEN + part
    return total & _FINGERPRINT_MASK


def batch_values(batch: Any, depth: int = 0) -> list[Any]:
    """What identifies a batch across processes, for :func:`fingerprint`: its tensors and
    plain values, walking tuples, lists, dicts and the attributes of objects (dataclasses),
    ``_BATCH_DEPTH`` levels deep (objects that refer to each other end there). Other objects
    count by their type only: their repr may hold an address, which differs between
    processes."""
    if isinstance(batch, (Tensor, bool, int, float, str, type(None))):
        return [batch]
    if depth == _BATCH_DEPTH:
        return [type(batch).__name__]
    if isinstance(batch, (list, tuple)):
        parts = [batch_values(item, depth + 1) for item in batch]
        return [type(batch).__name__, len(batch), *(v for part in parts for v in part)]
    items = batch.items() if isinstance(batch, dict) else []
    if not isinstance(batch, dict) and hasattr(batch, "__dict__"):
        items = vars(batch).items()
    named = sorted(((repr(key), value) for key, value in items), key=lambda item: item[0])
    parts = [[key, *batch_values(value, depth + 1)] for key, value in named]
    return [type(batch).__name__, len(named), *(v for part in parts for v in part)]


def _text_fingerprint(text: str) -> int:
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def _bytes_fingerprint(tensor: Tensor) -> Tensor:
    """The sum over the tensor's 8-byte words (then its last bytes) of each one times an odd
    multiplier of its position, modulo 2**64: a changed byte always changes it."""
    data = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
    if data.storage_offset() % 8:
        data = data.clone()  # int64 words must start at a multiple of 8 bytes
    body = data.numel() - data.numel() % 8
    words = data[:body].view(torch.int64)
    return _weighted_sum(words, 0) + _weighted_sum(data[body:].long(), words.numel())


def _weighted_sum(values: Tensor, first: int) -> Tensor:
    """sum(values[i] * (2 * (first + i) + 1) * _GOLDEN), in chunks (a bounded workspace)."""
    total = torch.zeros((), dtype=torch.int64, device=values.device)
    steps = torch.arange(min(values.numel(), _FINGERPRINT_CHUNK), device=values.device)
    steps *= _wrap(2 * _GOLDEN)
    for start in range(0, values.numel(), _FINGERPRINT_CHUNK):
        chunk = values[start : start + _FINGERPRINT_CHUNK]
        offset = _wrap((2 * (first + start) + 1) * _GOLDEN)
        total += (chunk * (steps[: chunk.numel()] + offset)).sum()
    return total


def _wrap(value: int) -> int:
    """``value`` modulo 2**64 as a signed int64."""
    return (value + 2**63) % 2**64 - 2**63


def _store() -> dist.Store:
    """The default process group's key-value store (the rendezvous'), which passes rank 0's
    messages to processes that wait for them without rank 0 waiting for anyone."""
    return dist.distributed_c10d._get_default_store()


def _modules(modules: Sequence[Optional[nn.Module]]) -> list[nn.Module]:
    return [module for module in modules if isinstance(module, nn.Module)]
