"""Runs PyG-style ``module(x, edge_index)`` modules under galfast's ``module(x, graph)``."""

from __future__ import annotations

from torch import Tensor, nn

from galfast.graph import Graph
from galfast.nn._layer_checks import check_callable

__all__ = ["EdgeIndexAdapter"]


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
        self.module = check_callable("module", module)

    def forward(self, inputs: Tensor, graph: Graph) -> Tensor:
        return self.module(inputs, graph.cached("edge_index", graph.edge_index))
