"""GATConv: graph attention on galfast's fused attention kernel."""

from __future__ import annotations

from typing import Optional, Union

import torch
from torch import Tensor
from torch.nn import Parameter

from galfast.graph import Graph
from galfast.nn._graph_input import graph_input
from galfast.nn._layer_checks import check_channels, check_features
from galfast.nn.norm import self_loops_replaced
from galfast.ops import gat_aggregate

__all__ = ["GATConv"]


class GATConv(torch.nn.Module):
    r"""The graph attention operator of Veličković et al., "Graph Attention Networks"
    (ICLR 2018), equal to PyG's ``GATConv`` for the same weights (same attention dropout
    probability, though not the same random mask).

    .. math::
        x'_i = \big\Vert_{k=1}^{H} \sum_{j \in \mathcal N(i) \cup \{i\}}
               \alpha_{ij}^k \Theta_k x_j + b, \qquad
        \alpha_{ij}^k = \mathrm{softmax}_j\Big(\mathrm{LeakyReLU}\big(a_{src,k}^\top
               \Theta_k x_j + a_{dst,k}^\top \Theta_k x_i\big)\Big)

    (heads averaged instead of concatenated when ``concat=False``). The logits, softmax and
    weighted sum run in one fused kernel (:func:`galfast.ops.gat_aggregate`) that never
    materialises per-edge features, so memory stays O(N H F + E).

    Args:
        in_channels: input features per node (bipartite pairs are not supported).
        out_channels: features per head.
        heads: number of attention heads. Default 1.
        concat: concatenate the heads (else average them). Default True.
        negative_slope: LeakyReLU slope. Default 0.2.
        dropout: dropout probability of the attention coefficients in training. Default 0.
        add_self_loops: replace every node's self loops by exactly one. Default True.
        edge_dim: edge features are not supported; must be None.
        bias: learn an additive bias. Default True.
        residual: add a linear projection of the input (PyG's ``residual``). Default False.

    Shapes:
        x ``[N, in_channels]``; ``edge_index_or_graph`` a ``[2, E]`` edge_index or a
        :class:`~galfast.Graph` -> ``[N, heads * out_channels]`` (or ``[N, out_channels]``
        when ``concat=False``).

    Example:
        >>> conv = GATConv(16, 8, heads=4)
        >>> conv(torch.randn(3, 16), torch.tensor([[0, 1], [1, 2]])).shape
        torch.Size([3, 32])
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        heads: int = 1,
        concat: bool = True,
        negative_slope: float = 0.2,
        dropout: float = 0.0,
        add_self_loops: bool = True,
        edge_dim: Optional[int] = None,
        bias: bool = True,
        residual: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(in_channels, int):
            raise ValueError("GATConv supports a single node type: in_channels must be an int")
        # out_channels = 0 would leave the attention vectors without fan-in to initialise.
        check_channels(in_channels, out_channels, minimum_out=1)
        if edge_dim is not None:
            raise ValueError("galfast's GATConv does not support edge features (edge_dim)")
        if heads < 1:
            raise ValueError(f"heads must be >= 1, got {heads}")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"dropout must lie in [0, 1], got {dropout}")
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.concat, self.negative_slope, self.dropout = concat, negative_slope, dropout
        self.add_self_loops, self.residual = add_self_loops, residual
        total = heads * out_channels if concat else out_channels
        self.lin = torch.nn.Linear(in_channels, heads * out_channels, bias=False)
        self.att_src = Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = Parameter(torch.empty(1, heads, out_channels))
        self.res = torch.nn.Linear(in_channels, total, bias=False) if residual else None
        self.bias = Parameter(torch.empty(total)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for weight in (self.lin.weight, self.att_src, self.att_dst):
            torch.nn.init.xavier_uniform_(weight)
        if self.res is not None:
            torch.nn.init.xavier_uniform_(self.res.weight)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(
        self,
        x: Tensor,
        edge_index_or_graph: Union[Tensor, Graph],
        edge_attr: Optional[Tensor] = None,
    ) -> Tensor:
        if edge_attr is not None:
            raise ValueError("galfast's GATConv does not support edge features (edge_attr)")
        check_features(x, self.in_channels, self.lin.weight)
        graph, _ = graph_input(edge_index_or_graph, x.size(0))
        if self.add_self_loops:
            graph, _ = self_loops_replaced(graph)
        h = self.lin(x).view(-1, self.heads, self.out_channels)
        alpha_src = (h * self.att_src).sum(-1)
        alpha_dst = (h * self.att_dst).sum(-1)
        out = gat_aggregate(
            graph,
            h,
            alpha_src,
            alpha_dst,
            negative_slope=self.negative_slope,
            dropout=self.dropout if self.training else 0.0,
        )
        out = out.flatten(1) if self.concat else out.mean(1)
        if self.res is not None:
            out = out + self.res(x)
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, heads={self.heads}"
