"""How the trainer calls an encoder, and moving user batches to the training device.

The encoder protocol. For node-level tasks the whole graph is encoded at every step (as in
the paper)::

    z = encoder(inputs, graph)        # [num_nodes, D]

where ``graph`` is the :class:`~galfast.Graph` given to ``fit`` and ``inputs`` is the ``x``
given to ``fit`` (``[num_nodes, F]`` features) or, when ``x`` is None, the node ids
``torch.arange(num_nodes)`` for encoders that learn one embedding per node (MovieLens).
Batches that bring their own graphs (molecules) define ``batch.encode(encoder) -> (z, ids)``
instead, see :class:`~galfast.train.GraphBatch`. PyG-style modules taking
``(x, edge_index)`` are wrapped with :class:`EdgeIndexAdapter`.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor, nn

from galfast.graph import Graph

__all__ = ["EdgeIndexAdapter", "move_to_device", "node_inputs"]


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
    return x.to(device)


class EdgeIndexAdapter(nn.Module):
    """Adapts a module called as ``module(x, edge_index)`` (a PyG layer or model) to galfast's
    ``module(x, graph)`` convention, for whole encoders and for single layers stacked in
    :class:`galfast.models.EmbeddingEncoder`. The ``[2, E]`` edge index is built once per
    graph and cached on it.

    Example:
        >>> from torch_geometric.nn import GCN  # doctest: +SKIP
        >>> encoder = EdgeIndexAdapter(GCN(16, 32, num_layers=2))  # doctest: +SKIP
    """

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, inputs: Tensor, graph: Graph) -> Tensor:
        return self.module(inputs, graph.cached("edge_index", graph.edge_index))


def move_to_device(obj: Any, device: torch.device) -> Any:
    """Moves tensors, objects with a ``.to(device)`` method, and tuples/lists/dicts of them."""
    if isinstance(obj, (tuple, list)):
        return type(obj)(move_to_device(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: move_to_device(v, device) for k, v in obj.items()}
    if hasattr(obj, "to"):
        return obj.to(device)
    return obj
