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
- ``fit`` checks, when it starts, that every process was given the same settings, graph,
  features, attributes, epochs, optimizer states and task batches (their type, length and
  tensor attributes; by fingerprints, :func:`fingerprint`): processes with other data raise
  ValueError together instead of averaging their gradients into a run of neither. Batches of
  a type of your own that yield other batches per process, or a different number of them, go
  unnoticed where their attributes are the same. The trainer's own collectives
  carry the name of their operation, so a process that calls ``save_checkpoint`` (or stops)
  alone raises instead of waiting for the others forever.
- Parameters and buffers are broadcast from rank 0 when ``fit`` starts; every process then
  takes the same optimizer steps, so encoder, task head, attackers and both optimizers stay
  identical everywhere. Buffers that each process moves by its own share (the running
  statistics of a torch BatchNorm in the task head or an attacker, such as ConvE's) are
  taken from rank 0 at the end of every epoch, as DDP takes them before every forward.
  Checkpoints are written by rank 0 only and load on any number of processes.
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

import hashlib
import os
from collections.abc import Iterable, Sequence
from typing import Any, Optional

import torch
import torch.distributed as dist
from torch import Tensor, nn

__all__ = ["ProcessGroup", "fingerprint", "init_distributed"]

# splitmix64's golden-ratio multiplier as an int64: fingerprints multiply and add modulo 2**64
# (int64 arithmetic wraps), so they are exact and independent of the order a device adds in.
_GOLDEN = 0x9E3779B97F4A7C15 - 2**64
_FINGERPRINT_MASK = 2**62 - 1  # non-negative, so that its negation fits an int64 too
_FINGERPRINT_CHUNK = 1 << 20  # words hashed at a time: bounds the int64 workspace


def init_distributed(backend: Optional[str] = None) -> torch.device:
    """Joins the process group ``torchrun`` describes (``RANK``, ``WORLD_SIZE``,
    ``MASTER_ADDR``...) and returns this process's device: ``cuda:LOCAL_RANK`` with NCCL when
    CUDA is available, else the CPU with gloo. Without torchrun's variables it starts nothing
    and returns the default device (a one-process run)."""
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else None
    if device is not None:
        torch.cuda.set_device(device)
    if "WORLD_SIZE" not in os.environ or dist.is_initialized():
        return device or torch.device("cpu")
    dist.init_process_group(backend or ("nccl" if cuda else "gloo"))
    return device or torch.device("cpu")


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

    def sum(self, values: Tensor) -> Tensor:
        """The elementwise sum of ``values`` over all processes."""
        if self.enabled:
            values = values.clone()
            dist.all_reduce(values)
        return values

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
        buffer = self.sum(torch.cat([*flat, flags]))
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
        for tensor in tensors:
            with torch.no_grad():
                dist.broadcast(tensor.data, src=0)

    def from_rank_zero(self, flag: bool, operation: str, device: torch.device) -> bool:
        """Rank 0's ``flag`` in every process (each waits for rank 0, as at a barrier)."""
        mine = int(flag) if self.rank == 0 else 0
        return bool(self._exchange(operation, [mine], device)[0][0])

    def any(self, flag: bool, operation: str, device: torch.device) -> bool:
        """True in every process when ``flag`` is True in one of them."""
        return bool(self._exchange(operation, [int(flag)], device)[0][0])

    def differing(self, fingerprints: dict[str, Tensor], operation: str) -> list[str]:
        """The names whose :func:`fingerprint` is not the same in every process (in every
        process; one all_reduce when all agree)."""
        if not self.enabled or not fingerprints:
            return []
        values = torch.stack(list(fingerprints.values()))
        combined = fingerprint([values], values.device)
        highest, lowest = self._exchange(operation, [len(values), int(combined)], values.device)
        if highest == lowest:
            return []
        if highest[0] != lowest[0]:
            return list(fingerprints)  # other entries altogether (another set of attributes)
        highest, lowest = self._exchange(operation, values.tolist(), values.device)
        return [name for name, high, low in zip(fingerprints, highest, lowest) if high != low]

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


def _modules(modules: Sequence[Optional[nn.Module]]) -> list[nn.Module]:
    return [module for module in modules if isinstance(module, nn.Module)]
