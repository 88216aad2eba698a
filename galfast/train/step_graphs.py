"""Replaying training steps from CUDA graphs (``GALTrainer(cuda_graphs=True)``).

A GAL step on a graph the size of MovieLens launches a few hundred small kernels, and on a
fast GPU the host issuing them from Python takes longer than the GPU running them. A CUDA
graph records the launches of one step and replays them all with one call:

- a step is known by its name and the structure, shapes, dtypes and devices of its input
  tensors (its *signature*);
- the first ``warmup`` runs of a signature are ordinary eager runs on a side stream: they
  create what must exist before a capture (optimizer state, cuBLAS workspaces, tensors a graph
  caches on first use). The next run is captured and then replayed, so every batch is trained
  on exactly once: a run with graphs takes the same steps as one without;
- later runs copy their inputs into the captured step's static inputs, replay, and return
  clones of its outputs (the next replay overwrites them).

A captured step may only do what CUDA graphs allow: no host synchronisation (``.item()``,
boolean-mask indexing, ``nonzero``), no CPU tensors, shapes fixed by the inputs, and
parameters updated in place by capturable optimizers. A signature whose capture fails runs
eagerly from then on, with a warning.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections import Counter
from collections.abc import Hashable, Iterator
from typing import Any, Callable

import torch
from torch import Tensor

from galfast._args import check_int

__all__ = ["StepGraphs", "flatten_tensors", "rebuild"]

_CONSTANTS = (type(None), bool, int, float, str)


class NotCapturable(TypeError):
    """Raised by :func:`flatten_tensors` for objects it cannot take apart."""


def flatten_tensors(obj: Any) -> tuple[list[Tensor], Hashable]:
    """``(tensors, structure)``: the tensors in ``obj`` (tensors, tuples, lists, named
    tuples, dicts and dataclasses of them, and plain constants) in a fixed order, and a
    hashable description that :func:`rebuild` turns back into the same kind of object."""
    leaves: list[Tensor] = []
    return leaves, _flatten(obj, leaves)


def _flatten(obj: Any, leaves: list[Tensor]) -> Hashable:
    if isinstance(obj, Tensor):
        leaves.append(obj)
        return Tensor
    if isinstance(obj, _CONSTANTS):
        return ("constant", obj)
    if isinstance(obj, (tuple, list)):
        return (type(obj), tuple(_flatten(item, leaves) for item in obj))
    if isinstance(obj, dict):
        keys = tuple(obj)
        return (dict, keys, tuple(_flatten(obj[k], leaves) for k in keys))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        names = tuple(f.name for f in dataclasses.fields(obj))
        return (type(obj), names, tuple(_flatten(getattr(obj, n), leaves) for n in names))
    raise NotCapturable(f"cannot capture a step taking a {type(obj).__name__}")


def rebuild(structure: Hashable, tensors: list[Tensor]) -> Any:
    """The object :func:`flatten_tensors` described by ``structure``, holding ``tensors``."""
    return _rebuild(structure, iter(tensors))


def _rebuild(structure: Hashable, tensors: Iterator[Tensor]) -> Any:
    if structure is Tensor:
        return next(tensors)
    kind = structure[0]
    if kind == "constant":
        return structure[1]
    if kind is dict:
        return {k: _rebuild(s, tensors) for k, s in zip(structure[1], structure[2])}
    if len(structure) == 2:  # a tuple or list (or a subclass of them)
        items = [_rebuild(s, tensors) for s in structure[1]]
        return kind(*items) if hasattr(kind, "_fields") else kind(items)
    # A dataclass: fields set directly, so frozen classes and init=False fields work too.
    obj = object.__new__(kind)
    for name, s in zip(structure[1], structure[2]):
        object.__setattr__(obj, name, _rebuild(s, tensors))
    return obj


def _signature(name: str, structure: Hashable, leaves: list[Tensor]) -> Hashable:
    return (name, structure, tuple((tuple(t.shape), t.dtype, t.device) for t in leaves))


class StepGraphs:
    """Runs named training steps, capturing each signature in a CUDA graph after ``warmup``
    eager runs and replaying it after that (see the module documentation).

    Args:
        device: the CUDA device the steps run on.
        warmup: eager runs of a signature before its capture.
        max_graphs: captured signatures kept at most; further ones run eagerly.

    Attributes:
        counts: ``{"eager": runs, "captured": signatures, "replayed": runs}``.
    """

    def __init__(self, device: torch.device, *, warmup: int = 2, max_graphs: int = 16) -> None:
        # A negative warmup captured a step before any eager run had created what a capture
        # needs; a string failed at the first comparison.
        warmup = check_int("warmup", warmup, 0)
        max_graphs = check_int("max_graphs", max_graphs, 0)
        self.device, self.warmup, self.max_graphs = torch.device(device), warmup, max_graphs
        self._side_stream = None
        self.clear()

    def clear(self) -> None:
        """Forgets every captured step (their tensors no longer match the model's)."""
        self._replays: dict[Hashable, Callable[[], Any]] = {}
        self._static: dict[Hashable, list[Tensor]] = {}
        self._runs: Counter = Counter()
        self._eager_only: set = set()
        self.counts = {"eager": 0, "captured": 0, "replayed": 0}

    def run(self, name: str, step: Callable[[Any], Any], inputs: Any) -> Any:
        """``step(inputs)``, eagerly or from the graph captured for this signature."""
        try:
            leaves, structure = flatten_tensors(inputs)
        except NotCapturable:
            return self._eager(step, inputs)
        key = _signature(name, structure, leaves)
        if key not in self._replays:
            self._runs[key] += 1
            if (
                key in self._eager_only
                or self._runs[key] <= self.warmup
                or len(self._replays) >= self.max_graphs
            ):
                return self._eager(step, inputs)
            static, failure = [t.clone() for t in leaves], None
            try:
                self._replays[key] = self._capture(step, rebuild(structure, static))
            except RuntimeError as error:
                failure = str(error)
            # Outside the except clause: the traceback (and the half-built autograd graph its
            # frames hold) is gone before the eager run builds a new one.
            if failure is not None:
                self._eager_only.add(key)
                warnings.warn(
                    f"galfast: the {name!r} step could not be captured in a CUDA graph and "
                    f"runs eagerly from now on ({failure})",
                    RuntimeWarning,
                    stacklevel=2,
                )
                return self._eager(step, inputs)
            self._static[key] = static
            self.counts["captured"] += 1
        for target, source in zip(self._static[key], leaves):
            target.copy_(source)
        outputs, out_structure = flatten_tensors(self._replays[key]())
        self.counts["replayed"] += 1
        return rebuild(out_structure, [t.clone() for t in outputs])

    def _capture(self, step: Callable[[Any], Any], static_inputs: Any) -> Callable[[], Any]:
        """Records ``step(static_inputs)`` (without running it); returns a function that
        replays the recording and returns its outputs, overwritten by every replay."""
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = step(static_inputs)

        def replay() -> Any:
            graph.replay()
            return outputs

        return replay

    def _eager(self, step: Callable[[Any], Any], inputs: Any) -> Any:
        """Runs ``step`` on a side stream, as captures need their warm-up runs to."""
        self.counts["eager"] += 1
        if self.device.type != "cuda":
            return step(inputs)
        if self._side_stream is None:
            self._side_stream = torch.cuda.Stream(self.device)
        main = torch.cuda.current_stream(self.device)
        self._side_stream.wait_stream(main)
        with torch.cuda.stream(self._side_stream):
            outputs = step(inputs)
        main.wait_stream(self._side_stream)
        try:
            produced = flatten_tensors(outputs)[0]
        except NotCapturable:
            produced = []
        for tensor in produced:
            if tensor.is_cuda:
                tensor.record_stream(main)  # the caller reads them on the main stream
        return outputs
