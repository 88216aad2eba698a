"""SAGEConv: GraphSAGE's neighbourhood aggregation on galfast's fused kernels."""

from __future__ import annotations

from functools import partial
from typing import Any, Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from galfast._args import check_flag
from galfast.graph import Graph
from galfast.nn._block_input import block_features
from galfast.nn._graph_input import layer_graph, unweighted
from galfast.nn._layer_checks import (
    Channels,
    channel_pair,
    check_channels,
    check_features,
    node_counts,
    split_features,
)
from galfast.nn._message_edges import message_edges
from galfast.nn._node_features import aggregate
from galfast.nn._pyg_compat import FusedLayer, make_linear
from galfast.nn._sage_aggregation import aggregated_channels, pyg_aggregation, run_aggregation
from galfast.ops import Block

__all__ = ["SAGEConv"]

_AGGRS = {"mean": "mean", "sum": "sum", "add": "sum", "max": "max", "min": "min"}


class SAGEConv(FusedLayer):
    r"""GraphSAGE from Hamilton et al., "Inductive Representation Learning on Large Graphs"
    (NeurIPS 2017), equal to PyG's ``SAGEConv`` for the same weights.

    .. math::
        x'_i = W_1 x_i + W_2 \cdot \mathop{\mathrm{aggr}}_{j \in \mathcal N(i)} x_j

    with ``aggr`` in mean, sum (alias add), max or min over the incoming edges (parallel
    edges counted; a node without neighbours aggregates 0), each one fused kernel call. Any
    other PyG aggregation (``"lstm"``, ``"softmax"``, ``"std"``, an ``Aggregation`` module,
    or a list of them combined as PyG's ``MultiAggregation``) runs PyG's own aggregation
    module, which needs torch_geometric installed; the plain sums, means, maxima and minima
    inside it still run on galfast's kernels (see :mod:`galfast.nn._sage_aggregation`).
    With ``project``, sources are
    first mapped by :math:`x_j \leftarrow \mathrm{ReLU}(W_3 x_j + b)`; with ``normalize`` the
    output is L2-normalised. As in PyG, an ``edge_index`` carries no weights, while a sparse
    ``adj_t``'s values weight the aggregated features (PyG's ``spmm``); a Graph's stored
    weights are ignored.

    Args:
        in_channels: input features per node, -1 to infer them on the first call, or a pair
            ``(source, destination)`` for bipartite inputs ``x = (x_src, x_dst)``.
        out_channels: output features per node.
        aggr: ``"mean"`` (default), ``"sum"``/``"add"``, ``"max"`` or ``"min"`` (fused), or
            any of PyG's other aggregations: a name (``"lstm"``, ``"softmax"``, ...), a list
            of names or modules, or a ``torch_geometric.nn.aggr.Aggregation``; it is then
            held as ``aggr_module`` (the state-dict keys are PyG's).
        normalize: L2-normalise the output. Default False.
        root_weight: add the transformed root features :math:`W_1 x_i`. Default True.
        project: project the neighbour features first. Default False.
        bias: learn a bias in :math:`W_2`. Default True.
        **kwargs: PyG's ``MessagePassing`` options (``flow`` is honoured, ``aggr_kwargs``
            goes to PyG's aggregation resolver as in PyG).

    Shapes:
        x ``[N, in_channels]`` or ``(x_src [N_src, C_src], x_dst [N_dst, C_dst] or None)``;
        ``edge_index`` a ``[2, E]`` edge_index, a sparse ``adj_t`` ``[N_dst, N_src]`` or a
        :class:`~galfast.Graph`; ``size`` ``(N_src, N_dst)`` (optional) -> ``[N_dst,
        out_channels]``. On a sampled :class:`~galfast.ops.Block`: x ``[num_src,
        in_channels]`` (the features of ``block.src_nodes``) -> ``[num_dst, out_channels]``,
        aggregating over the sampled neighbours (as PyG and DGL on sampled subgraphs).

    Example:
        >>> conv = SAGEConv(16, 32, aggr="max")
        >>> conv(torch.randn(3, 16), torch.tensor([[0, 1], [1, 2]])).shape
        torch.Size([3, 32])
    """

    def __init__(
        self,
        in_channels: Channels,
        out_channels: int,
        aggr: Union[str, list, torch.nn.Module] = "mean",
        normalize: bool = False,
        root_weight: bool = True,
        project: bool = False,
        bias: bool = True,
        **kwargs: Any,
    ) -> None:
        aggr_kwargs = kwargs.pop("aggr_kwargs", None)
        super().__init__(**kwargs)
        in_channels, out_channels = check_channels(in_channels, out_channels, lazy=True, pair=True)
        normalize, project = check_flag("normalize", normalize), check_flag("project", project)
        root_weight, bias = check_flag("root_weight", root_weight), check_flag("bias", bias)
        src_channels, dst_channels = channel_pair(in_channels)
        if project and src_channels < 0:
            raise ValueError(
                "'SAGEConv' does not support lazy initialization with `project=True`: give "
                "in_channels"
            )
        self.in_channels, self.out_channels = in_channels, out_channels
        self.normalize, self.root_weight, self.project = normalize, root_weight, project
        # A name PyG fuses runs on one galfast kernel; anything else is PyG's module.
        self._reduce = _AGGRS.get(aggr) if isinstance(aggr, str) and not aggr_kwargs else None
        if self._reduce is not None:
            self.aggr, aggr_channels = aggr, src_channels
        else:
            self.aggr_module = pyg_aggregation(aggr, aggr_kwargs, src_channels)
            self.aggr = [str(a) for a in aggr] if isinstance(aggr, (list, tuple)) else str(aggr)
            aggr_channels = aggregated_channels(self.aggr_module, src_channels)
        if project:
            self.lin = torch.nn.Linear(src_channels, src_channels, bias=True)
        self.lin_l = make_linear(max(aggr_channels, -1), out_channels, bias=bias)
        if root_weight:
            self.lin_r = make_linear(dst_channels, out_channels, bias=False)
        # PyG's SAGEConv resets once more after building its parts: the same seed then gives
        # the same weights (and leaves the generator in the same state) as PyG's layer.
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in self.children():
            lin.reset_parameters()

    def forward(
        self,
        x: Union[Tensor, tuple[Tensor, Optional[Tensor]]],
        edge_index: Union[Tensor, Graph, Any],
        size: Optional[tuple[int, int]] = None,
    ) -> Tensor:
        if isinstance(edge_index, Block):
            x, edge_index = block_features(x, edge_index), edge_index.as_bipartite_graph()
        x_src, x_dst = split_features(x, bipartite=True)
        # lin_l reads the aggregation's output, as wide as x_src for one reduction.
        aggregated = x_src
        if self._reduce is None and x_src.dim() == 2:
            width = aggregated_channels(self.aggr_module, x_src.size(1))
            aggregated = x_src.new_empty(0, width)
        pairs = [(self.lin_l, aggregated)] + ([(self.lin_r, x_dst)] if self.root_weight else [])
        self._materialize(*((m, t) for m, t in pairs if t is not None))
        src_channels, dst_channels = channel_pair(self.in_channels)
        check_features(x_src, src_channels, self.lin_l.weight, "x_src")
        if x_dst is not None and x_dst is not x_src:
            check_features(x_dst, dst_channels, self.lin_l.weight, "x_dst")
        num_src, num_dst = node_counts(x_src, x_dst, size, isinstance(x, (tuple, list)))
        two_sets = isinstance(x, (tuple, list))
        graph, weight, _, sparse = layer_graph(
            edge_index, num_dst, num_src if two_sets else None, flow=self.flow
        )
        source = F.relu(self.lin(x_src)) if self.project else x_src
        if self._reduce is None:
            # PyG's module sees unweighted messages, whatever the input form.
            messages = partial(message_edges, edge_index, graph, self.flow)
            out = run_aggregation(
                self.aggr_module, unweighted(graph), source, messages, graph.num_nodes
            )
            out = self.lin_l(out)
        else:
            out = self._fused(
                graph if sparse else unweighted(graph), weight if sparse else None, source
            )
        if self.root_weight and x_dst is not None:
            out = out + self.lin_r(x_dst)
        if self.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return out

    def _fused(self, graph: Graph, weight: Optional[Tensor], source: Tensor) -> Tensor:
        """``lin_l`` of one fused reduction (weighted by a sparse adj_t's values)."""
        reduce = self._reduce
        # lin_l is affine, so for sum and mean it commutes with the aggregation (an empty
        # neighbourhood gives lin_l(0) = bias either way): aggregate the narrower side.
        if reduce in ("sum", "mean") and self.out_channels < self.lin_l.in_features:
            projected = F.linear(source, self.lin_l.weight)
            # In the projection's dtype, as lin_l's output: bfloat16 under CPU autocast, where
            # the CPU kernel sums in float32.
            out = aggregate(graph, projected, weight, reduce=reduce).to(projected.dtype)
            return out if self.lin_l.bias is None else out + self.lin_l.bias.to(out.dtype)
        if reduce == "min":
            return self.lin_l(-aggregate(graph, -source, weight, reduce="max"))
        return self.lin_l(aggregate(graph, source, weight, reduce=reduce))

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, aggr={self.aggr}"
