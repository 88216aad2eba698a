"""SAGEConv: GraphSAGE's neighbourhood aggregation on galfast's fused kernels."""

from __future__ import annotations

from typing import Union

import torch
import torch.nn.functional as F
from torch import Tensor

from galfast.graph import Graph
from galfast.nn._graph_input import graph_input, unweighted
from galfast.nn._layer_checks import check_channels, check_features
from galfast.ops import aggregate

__all__ = ["SAGEConv"]

_AGGRS = {"mean": "mean", "sum": "sum", "add": "sum", "max": "max"}


class SAGEConv(torch.nn.Module):
    r"""GraphSAGE from Hamilton et al., "Inductive Representation Learning on Large Graphs"
    (NeurIPS 2017), equal to PyG's ``SAGEConv`` for the same weights.

    .. math::
        x'_i = W_1 x_i + W_2 \cdot \mathop{\mathrm{aggr}}_{j \in \mathcal N(i)} x_j

    with ``aggr`` in mean, sum (alias add) or max over the incoming edges (parallel edges
    counted; a node without neighbours aggregates 0). With ``project``, sources are first
    mapped by :math:`x_j \leftarrow \mathrm{ReLU}(W_3 x_j + b)`; with ``normalize`` the output
    is L2-normalised. Edge weights, as in PyG, are ignored.

    Args:
        in_channels: input features per node.
        out_channels: output features per node.
        aggr: ``"mean"`` (default), ``"sum"``/``"add"`` or ``"max"``.
        normalize: L2-normalise the output. Default False.
        root_weight: add the transformed root features :math:`W_1 x_i`. Default True.
        project: project the neighbour features first. Default False.
        bias: learn a bias in :math:`W_2`. Default True.

    Shapes:
        x ``[N, in_channels]``; ``edge_index_or_graph`` a ``[2, E]`` edge_index or a
        :class:`~galfast.Graph` -> ``[N, out_channels]``.

    Example:
        >>> conv = SAGEConv(16, 32, aggr="max")
        >>> conv(torch.randn(3, 16), torch.tensor([[0, 1], [1, 2]])).shape
        torch.Size([3, 32])
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        aggr: str = "mean",
        normalize: bool = False,
        root_weight: bool = True,
        project: bool = False,
        bias: bool = True,
    ) -> None:
        super().__init__()
        check_channels(in_channels, out_channels)
        if aggr not in _AGGRS:
            raise ValueError(f"aggr must be one of {sorted(_AGGRS)}, got {aggr!r}")
        self.in_channels, self.out_channels, self.aggr = in_channels, out_channels, aggr
        self.normalize, self.root_weight, self.project = normalize, root_weight, project
        if project:
            self.lin = torch.nn.Linear(in_channels, in_channels, bias=True)
        self.lin_l = torch.nn.Linear(in_channels, out_channels, bias=bias)
        if root_weight:
            self.lin_r = torch.nn.Linear(in_channels, out_channels, bias=False)

    def reset_parameters(self) -> None:
        for lin in self.children():
            lin.reset_parameters()

    def forward(self, x: Tensor, edge_index_or_graph: Union[Tensor, Graph]) -> Tensor:
        check_features(x, self.in_channels, self.lin_l.weight)
        graph, _ = graph_input(edge_index_or_graph, x.size(0))
        graph = unweighted(graph)
        reduce = _AGGRS[self.aggr]
        source = F.relu(self.lin(x)) if self.project else x
        # lin_l is affine, so for sum and mean it commutes with the aggregation (an empty
        # neighbourhood gives lin_l(0) = bias either way): aggregate the narrower side.
        if reduce != "max" and self.out_channels < self.in_channels:
            out = aggregate(graph, F.linear(source, self.lin_l.weight), reduce=reduce)
            if self.lin_l.bias is not None:
                out = out + self.lin_l.bias
        else:
            out = self.lin_l(aggregate(graph, source, reduce=reduce))
        if self.root_weight:
            out = out + self.lin_r(x)
        if self.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return out

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, aggr={self.aggr!r}"
