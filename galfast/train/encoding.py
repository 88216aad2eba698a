"""How the trainer calls an encoder, and moving user batches to the training device.

The encoder protocol. For node-level tasks the whole graph is encoded at every step (as in
the paper)::

    z = encoder(inputs, graph)        # [num_nodes, D]

where ``graph`` is the :class:`~galfast.Graph` given to ``fit`` and ``inputs`` is the ``x``
given to ``fit`` (``[num_nodes, F]`` features) or, when ``x`` is None, the node ids
``torch.arange(num_nodes)`` for encoders that learn one embedding per node (MovieLens).
Batches that bring their own graphs (molecules) define ``batch.encode(encoder) -> (z, ids)``
instead, see :class:`~galfast.train.GraphBatch`. PyG-style modules taking
``(x, edge_index)`` are wrapped with :class:`galfast.nn.EdgeIndexAdapter`.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor

from galfast._dtypes import all_finite
from galfast.graph import Graph

__all__ = ["move_to_device", "node_inputs", "to_device_without_waiting"]


def node_inputs(graph: Graph, x: Optional[Tensor], device: torch.device) -> Tensor:
    """The first argument the encoder receives: ``x`` (checked) or the node ids (built
    once per graph: the same tensor every time, which steps captured in CUDA graphs need)."""
    if x is None:
        ids = lambda: torch.arange(graph.num_nodes, device=device)  # noqa: E731
        return graph.cached("node_ids", ids) if graph.device == torch.device(device) else ids()
    if not isinstance(x, Tensor) or x.dim() < 1 or x.size(0) != graph.num_nodes:
        shape = list(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(
            f"x must be a tensor with one row per node ({graph.num_nodes}), got {shape}"
        )
    if x.is_floating_point() and not all_finite(x):
        raise ValueError("x contains NaN or infinite values")
    return x.to(device)


def to_device_without_waiting(t: Tensor, device: torch.device) -> Tensor:
    """``t.to(device)``, except that a CPU tensor goes to a GPU through pinned memory: a copy
    from pageable memory makes the host wait until the GPU has run every kernel queued before
    it, so one per training step kept the host from queueing the next step meanwhile."""
    if device.type == "cuda" and t.device.type == "cpu":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def move_to_device(obj: Any, device: torch.device) -> Any:
    """Moves tensors, objects with a ``.to(device)`` method, and tuples/lists/dicts of them."""
    if isinstance(obj, (tuple, list)):
        return type(obj)(move_to_device(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: move_to_device(v, device) for k, v in obj.items()}
    if hasattr(obj, "to"):
        return obj.to(device)
    return obj
