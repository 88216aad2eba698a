"""GCNConv: Kipf & Welling's graph convolution on galfast's fused aggregation."""

from __future__ import annotations

from typing import Any, Optional, Union

import torch
from torch import Tensor
from torch.nn import Parameter

from galfast._args import check_flag
from galfast.graph import Graph
from galfast.nn._block_input import block_features, gcn_block_terms
from galfast.nn._graph_input import is_adjacency, layer_graph
from galfast.nn._layer_checks import check_channels, check_features, split_features
from galfast.nn._node_features import aggregate_nodes, linear
from galfast.nn._pyg_compat import FusedLayer, make_linear
from galfast.nn.norm import gcn_norm, sparse_self_loops
from galfast.ops import Block, block_aggregate

__all__ = ["GCNConv"]


class GCNConv(FusedLayer):
    r"""The graph convolution of Kipf & Welling, "Semi-supervised Classification with Graph
    Convolutional Networks" (ICLR 2017), equal to PyG's ``GCNConv`` for the same weights.

    .. math::
        X' = \hat D^{-1/2} \hat A \hat D^{-1/2} X \Theta + b, \qquad
        x'_i = \Theta^\top \sum_{j \in \mathcal N(i) \cup \{i\}}
               \frac{e_{ji}}{\sqrt{\hat d_j \hat d_i}} x_j + b

    with :math:`\hat A = A + I` (``A + 2I`` if ``improved``; see below) and
    :math:`\hat d_i = \sum_j \hat a_{ij}` (see :func:`galfast.nn.norm.gcn_norm`). Without edge
    weights the normalisation is computed on the fly inside the fused kernel.

    ``improved`` follows PyG 2.8 exactly, input form by input form: the added self loops weigh
    2 when the graph carries weights (an ``edge_weight``, a weighted Graph, or a sparse
    ``adj_t``, whose values are weights) and 1 for an unweighted ``edge_index`` or Graph, where
    PyG's ``gcn_norm`` drops the fill value. Likewise a sparse ``adj_t``'s existing self loops
    are summed with the added ones (torch.sparse) or replaced (torch_sparse), as PyG does.

    Args:
        in_channels: input features per node; -1 infers them on the first call.
        out_channels: output features per node.
        improved: weight the added self loops 2 (see above). Default False.
        cached: as PyG: cache the normalised graph of the first call and reuse it on every
            later call, whatever graph is passed (for transductive training). galfast also
            caches normalisations per Graph, so the default False is fast too.
        add_self_loops: add self loops (replacing existing ones); defaults to ``normalize``.
        normalize: apply the symmetric normalisation; otherwise aggregate
            :math:`\sum_j e_{ji} x_j`. Default True.
        bias: learn an additive bias. Default True.
        **kwargs: PyG's ``MessagePassing`` options: ``flow`` (honoured), ``aggr="add"``,
            ``node_dim``, ``decomposed_layers=1`` (see :class:`~galfast.nn._pyg_compat.FusedLayer`).

    Shapes:
        x ``[N, in_channels]`` (or ``[B, N, in_channels]``, or sparse); ``edge_index`` a
        ``[2, E]`` edge_index, a sparse ``adj_t`` ``[N, N]`` or a :class:`~galfast.Graph`;
        ``edge_weight`` ``[E]`` (optional, differentiable) -> ``[N, out_channels]``. On a
        sampled :class:`~galfast.ops.Block`: x ``[num_src, in_channels]`` (the features of
        ``block.src_nodes``) -> ``[num_dst, out_channels]``, normalised by the whole graph's
        degrees (``block.graph``, its stored weights), each sampled neighbour's term scaled by
        in-degree / sampled in-degree of its destination (exactly the full-graph rows when
        every in-edge is sampled; see :mod:`galfast.nn._block_input`).

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
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        in_channels, out_channels = check_channels(in_channels, out_channels, lazy=True)
        improved, cached = check_flag("improved", improved), check_flag("cached", cached)
        normalize, bias = check_flag("normalize", normalize), check_flag("bias", bias)
        if add_self_loops is None:
            add_self_loops = normalize
        add_self_loops = check_flag("add_self_loops", add_self_loops)
        if add_self_loops and not normalize:
            raise ValueError(
                "GCNConv does not support adding self-loops to the graph when no "
                "normalization is applied (add_self_loops=True needs normalize=True)"
            )
        self.in_channels, self.out_channels = in_channels, out_channels
        self.improved, self.cached = improved, cached
        self.add_self_loops, self.normalize = add_self_loops, normalize
        self.lin = make_linear(in_channels, out_channels, bias=False, weight_initializer="glorot")
        self.bias = Parameter(torch.empty(out_channels)) if bias else None
        self._cached_edge_index: Optional[tuple[Graph, Optional[Tensor], Optional[str]]] = None
        self._cached_adj_t: Optional[tuple[Graph, Optional[Tensor], Optional[str]]] = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if not isinstance(self.lin.weight, torch.nn.parameter.UninitializedParameter):
            torch.nn.init.xavier_uniform_(self.lin.weight)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)
        self._cached_edge_index = self._cached_adj_t = None

    def forward(
        self,
        x: Tensor,
        edge_index: Union[Tensor, Graph, Any],
        edge_weight: Optional[Tensor] = None,
    ) -> Tensor:
        if isinstance(edge_index, Block):
            return self._forward_block(x, edge_index, edge_weight)
        x_in, _ = split_features(x, bipartite=False)
        self._materialize((self.lin, x_in))
        # A static batch [B, N, F] is checked as one of its feature sets.
        check_features(x[0] if x.dim() == 3 else x, self.in_channels, self.lin.weight)
        graph, weight, norm = self._normalised(edge_index, edge_weight, x)
        # Both orders give the same result; aggregating the narrower side moves less data.
        if self.out_channels <= self.lin.in_features or x.is_sparse:
            out = aggregate_nodes(graph, linear(self.lin, x), weight, norm=norm)
        else:
            out = self.lin(aggregate_nodes(graph, x, weight, norm=norm))
        return out if self.bias is None else out + self.bias

    def _forward_block(self, x: Tensor, block: Block, edge_weight: Optional[Tensor]) -> Tensor:
        if edge_weight is not None or not self.add_self_loops or self.cached:
            raise ValueError(
                "GCNConv on a Block supports the default normalize=True, add_self_loops=True, "
                "cached=False and no edge_weight (it reads the weights stored on block.graph)"
            )
        x, _ = block_features(x, block)
        self._materialize((self.lin, x))
        check_features(x, self.in_channels, self.lin.weight)
        h = self.lin(x)
        edge_w, self_w = gcn_block_terms(block, self.improved, h.dtype)
        out = block_aggregate(block, h, edge_w) + self_w.unsqueeze(-1) * h[: block.num_dst]
        return out if self.bias is None else out + self.bias

    def _normalised(
        self, edge_index, edge_weight, x
    ) -> tuple[Graph, Optional[Tensor], Optional[str]]:
        """(graph, weights, norm) to aggregate with; with ``cached``, those of the first call."""
        sparse = is_adjacency(edge_index)
        # PyG's slots: a torch.sparse adj_t is a Tensor, cached with the edge_index forms.
        slot = "_cached_edge_index" if isinstance(edge_index, Tensor) else "_cached_adj_t"
        if self.cached and getattr(self, slot) is not None:
            return getattr(self, slot)
        graph, weight, _, _ = layer_graph(edge_index, x.size(-2), None, edge_weight, flow=self.flow)
        norm = None
        if self.normalize:
            improved = self.improved and (weight is not None or sparse)
            if sparse and self.add_self_loops:
                fill = 2.0 if improved else 1.0
                keep = isinstance(edge_index, Tensor)  # torch.sparse adds, torch_sparse replaces
                graph, weight = sparse_self_loops(
                    graph, weight, fill, keep_existing=keep, dtype=x.dtype
                )
                graph, weight = gcn_norm(graph, weight, add_self_loops=False, dtype=x.dtype)
            else:
                graph, weight = gcn_norm(
                    graph,
                    weight,
                    improved=improved,
                    add_self_loops=self.add_self_loops,
                    dtype=x.dtype,
                )
            norm = "gcn" if weight is None else None
        if self.cached:
            setattr(self, slot, (graph, weight, norm))
        return graph, weight, norm

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}"
