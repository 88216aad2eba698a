"""GCNConv: Kipf & Welling's graph convolution on galfast's fused aggregation."""

from __future__ import annotations

from typing import Optional, Union

import torch
from torch import Tensor
from torch.nn import Parameter

from galfast.graph import Graph
from galfast.nn._graph_input import graph_input
from galfast.nn._layer_checks import check_channels, check_features
from galfast.nn.norm import gcn_norm
from galfast.ops import aggregate

__all__ = ["GCNConv"]


class GCNConv(torch.nn.Module):
    r"""The graph convolution of Kipf & Welling, "Semi-supervised Classification with Graph
    Convolutional Networks" (ICLR 2017), equal to PyG's ``GCNConv`` for the same weights.

    .. math::
        X' = \hat D^{-1/2} \hat A \hat D^{-1/2} X \Theta + b, \qquad
        x'_i = \Theta^\top \sum_{j \in \mathcal N(i) \cup \{i\}}
               \frac{e_{ji}}{\sqrt{\hat d_j \hat d_i}} x_j + b

    with :math:`\hat A = A + I` (``A + 2I`` if ``improved``) and
    :math:`\hat d_i = \sum_j \hat a_{ij}` (see :func:`galfast.nn.norm.gcn_norm`). Without edge
    weights the normalisation is computed on the fly inside the fused kernel.

    Args:
        in_channels: input features per node.
        out_channels: output features per node.
        improved: use :math:`A + 2I`. Default False.
        cached: accepted for PyG compatibility; galfast always caches the normalisation on
            the Graph (keyed by structure), so this changes nothing. Default False.
        add_self_loops: add self loops (replacing existing ones); defaults to ``normalize``.
        normalize: apply the symmetric normalisation; otherwise aggregate
            :math:`\sum_j e_{ji} x_j`. Default True.
        bias: learn an additive bias. Default True.

    Shapes:
        x ``[N, in_channels]``; ``edge_index_or_graph`` a ``[2, E]`` edge_index or a
        :class:`~galfast.Graph`; ``edge_weight`` ``[E]`` (optional, differentiable) ->
        ``[N, out_channels]``.

    Example:
        >>> conv = GCNConv(16, 32)
        >>> conv(torch.randn(3, 16), torch.tensor([[0, 1], [1, 2]])).shape
        torch.Size([3, 32])
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        improved: bool = False,
        cached: bool = False,
        add_self_loops: Optional[bool] = None,
        normalize: bool = True,
        bias: bool = True,
    ) -> None:
        super().__init__()
        check_channels(in_channels, out_channels)
        if add_self_loops is None:
            add_self_loops = normalize
        if add_self_loops and not normalize:
            raise ValueError("GCNConv adds self loops only with normalize=True")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.improved, self.cached = improved, cached
        self.add_self_loops, self.normalize = add_self_loops, normalize
        self.lin = torch.nn.Linear(in_channels, out_channels, bias=False)
        self.bias = Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        torch.nn.init.xavier_uniform_(self.lin.weight)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(
        self,
        x: Tensor,
        edge_index_or_graph: Union[Tensor, Graph],
        edge_weight: Optional[Tensor] = None,
    ) -> Tensor:
        check_features(x, self.in_channels, self.lin.weight)
        graph, weight = graph_input(edge_index_or_graph, x.size(0), edge_weight)
        norm = None
        if self.normalize:
            graph, weight = gcn_norm(
                graph,
                weight,
                improved=self.improved,
                add_self_loops=self.add_self_loops,
                dtype=x.dtype,
            )
            norm = "gcn" if weight is None else None
        # Both orders give the same result; aggregating the narrower side moves less data.
        if self.out_channels <= self.in_channels:
            out = aggregate(graph, self.lin(x), weight, norm=norm)
        else:
            out = self.lin(aggregate(graph, x, weight, norm=norm))
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}"
