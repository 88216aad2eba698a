"""NNConv: the edge-conditioned convolution of Gilmer et al. on galfast's fused kernel."""

from __future__ import annotations

import math
from typing import Any, Callable, Optional, Union

import torch
from torch import Tensor
from torch.nn import Parameter
from torch.utils.checkpoint import checkpoint

from galfast._args import check_choice, check_flag
from galfast.graph import Graph
from galfast.nn._graph_input import layer_graph
from galfast.nn._layer_checks import (
    channel_pair,
    check_callable,
    check_channels,
    check_features,
    node_counts,
    split_features,
)
from galfast.nn._pyg_compat import Unscriptable, reset_module
from galfast.ops import nnconv_aggregate

__all__ = ["NNConv"]

_AGGRS = ("add", "sum", "mean", "max")  # "sum": PyG's alias of "add"
# The materialising path builds at most this many bytes of per-edge matrices at once (and
# rebuilds them in the backward), so its memory stays bounded on any graph.
_FALLBACK_CHUNK_BYTES = 32 * 2**20


def split_last_linear(
    nn: torch.nn.Module,
) -> Optional[tuple[list[torch.nn.Module], torch.nn.Linear]]:
    """``(prefix, last)`` when `nn` is a ``Linear`` (empty prefix) or a ``Sequential`` whose
    last module is one; None otherwise (the fused kernel then does not apply)."""
    if isinstance(nn, torch.nn.Linear):
        return [], nn
    if isinstance(nn, torch.nn.Sequential) and len(nn) and isinstance(nn[-1], torch.nn.Linear):
        return list(nn)[:-1], nn[-1]
    return None


def one_node_set(graph: Graph, x_src: Tensor) -> tuple[Graph, Tensor]:
    """A bipartite ``graph`` and its source features as one node set of ``max(num_src,
    num_dst)`` nodes, which the fused kernel takes: destinations past ``num_dst`` have no
    edge, and source rows past ``num_src`` are zeros no edge reads. One node set as it is."""
    if not graph.is_bipartite:
        return graph, x_src
    nodes = max(graph.num_nodes, graph.num_src_nodes)

    def build() -> Graph:
        no_edges = graph.rowptr[-1:].expand(nodes - graph.num_nodes)
        return Graph(torch.cat([graph.rowptr, no_edges]), graph.col, nodes)

    square = graph.cached(("nn", "nnconv one node set"), build)
    padding = x_src.new_zeros(nodes - x_src.size(0), x_src.size(1))
    return square, torch.cat([x_src, padding]) if padding.size(0) else x_src


class NNConv(Unscriptable):
    r"""The edge-conditioned convolution of Gilmer et al., "Neural Message Passing for Quantum
    Chemistry" (ICML 2017), equal to PyG's ``NNConv`` for the same weights (its state dict
    loads into PyG's and back).

    .. math::
        x'_i = \Theta x_i + \mathop{\mathrm{aggr}}_{j \to i} x_j\, h_\Theta(e_{ji}) + b

    with :math:`h_\Theta(e_{ji})` reshaped to ``[in_channels, out_channels]``. When ``nn`` is a
    ``torch.nn.Linear`` or a ``torch.nn.Sequential`` ending in one and ``aggr`` is ``"add"``
    or ``"mean"``, the message is bilinear in (last hidden edge features, :math:`x_j`) and
    :func:`galfast.ops.nnconv_aggregate` sums it per node before applying the last layer: no
    ``[E, in, out]`` tensor is built. Otherwise (another ``nn``, or ``aggr="max"``) the
    per-edge matrices are built in chunks of edges, recomputed in the backward, so memory
    stays bounded.

    Args:
        in_channels: input features per node, or a ``(source, destination)`` pair for two node
            sets (PyG's bipartite form: ``nn`` gives ``source * out_channels`` values per edge
            and :math:`\Theta` reads the destinations' features).
        out_channels: output features per node.
        nn: maps ``edge_attr`` ``[E, D]`` to ``[E, in_channels * out_channels]`` (a module or,
            as in PyG, any callable).
        aggr: ``"add"`` (alias ``"sum"``), ``"mean"`` or ``"max"`` (nodes without incoming
            edges give 0).
        root_weight: add :math:`\Theta x_i`. Default True.
        bias: learn an additive bias. Default True.

    Shapes:
        x ``[N, in_channels]``; ``edge_index`` a ``[2, E]`` edge_index, a sparse ``adj_t``
        ``[N, N]`` (its values are not used, as in PyG) or a :class:`~galfast.Graph`;
        ``edge_attr`` ``[E, D]`` following the edge_index columns (an adj_t's stored entries,
        the Graph's CSR edge order); ``size`` ``(N, N)`` (optional) -> ``[N, out_channels]``.

    Example:
        >>> edge_nn = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(),
        ...                               torch.nn.Linear(8, 4 * 3))
        >>> conv = NNConv(4, 3, edge_nn, aggr="mean")
        >>> conv(torch.randn(3, 4), torch.tensor([[0, 1], [1, 2]]), torch.randn(2, 5)).shape
        torch.Size([3, 3])
    """

    def __init__(
        self,
        in_channels: Union[int, tuple[int, int]],
        out_channels: int,
        nn: Callable,
        aggr: str = "add",
        root_weight: bool = True,
        bias: bool = True,
    ) -> None:
        super().__init__()
        in_channels, out_channels = check_channels(in_channels, out_channels, pair=True)
        aggr, nn = check_choice("aggr", aggr, _AGGRS), check_callable("nn", nn)
        root_weight, bias = check_flag("root_weight", root_weight), check_flag("bias", bias)
        self.in_channels, self.out_channels = in_channels, out_channels
        # PyG's name for the source side, which the edge network's matrices multiply.
        self.in_channels_l, dst_channels = channel_pair(in_channels)
        self.nn, self.aggr, self.root_weight = nn, aggr, root_weight
        if root_weight:
            self.lin = torch.nn.Linear(dst_channels, out_channels, bias=False)
        self.bias = Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_module(self.nn)
        if self.root_weight:  # PyG's 'uniform' initialiser of its Linear
            dst_channels = self.lin.in_features
            bound = 1.0 / math.sqrt(dst_channels) if dst_channels else 0.0
            torch.nn.init.uniform_(self.lin.weight, -bound, bound)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(
        self,
        x: Union[Tensor, tuple[Tensor, Optional[Tensor]]],
        edge_index: Union[Tensor, Graph, Any],
        edge_attr: Optional[Tensor] = None,
        size: Optional[tuple[int, int]] = None,
    ) -> Tensor:
        two_sets = isinstance(x, (tuple, list))
        x_src, x_dst = split_features(x, bipartite=True)
        reference = self.lin.weight if self.root_weight else x_src
        check_features(x_src, self.in_channels_l, reference, "x_src" if two_sets else "x")
        if self.root_weight and x_dst is not None and x_dst is not x_src:
            check_features(x_dst, self.lin.in_features, reference, "x_dst")
        num_src, num_dst = node_counts(x_src, x_dst, size, two_sets)
        graph, _, order, _ = layer_graph(edge_index, num_dst, num_src if two_sets else None)
        if edge_attr is None:  # PyG's edge network would fail on None deep inside
            raise ValueError("NNConv needs edge_attr: the edge features its nn maps per edge")
        if not isinstance(edge_attr, Tensor) or edge_attr.size(0) != graph.num_edges:
            shape = list(edge_attr.shape) if isinstance(edge_attr, Tensor) else edge_attr
            raise ValueError(
                f"edge_attr must be a tensor with one row per edge ({graph.num_edges}), got {shape}"
            )
        if order is not None:
            edge_attr = edge_attr[order]
        split = split_last_linear(self.nn)
        if split is not None and self.aggr != "max" and self.in_channels_l > 0:
            prefix, last = split
            # The kernel would read a wider last layer as more output channels (PyG fails).
            if last.out_features != self.in_channels_l * self.out_channels:
                raise self._edge_network_error(f"{last.out_features} values per edge")
            hidden = edge_attr
            for module in prefix:
                hidden = module(hidden)
            if hidden.dim() != 2 or hidden.size(1) != last.in_features:
                # (the kernel would name its own arguments, not edge_attr)
                given = "edge_attr has shape" if not prefix else "nn's layers before its last give"
                raise ValueError(
                    f"{given} {list(hidden.shape)}, but nn's last layer {last} takes "
                    f"[num_edges, {last.in_features}]"
                    + (
                        " (one feature per edge: edge_attr.view(-1, 1))"
                        if hidden.dim() == 1
                        else ""
                    )
                )
            reduce = "mean" if self.aggr == "mean" else "sum"
            square, x_square = one_node_set(graph, x_src)
            out = nnconv_aggregate(square, x_square, hidden, last.weight, last.bias, reduce=reduce)
            out = out[: graph.num_nodes]
        else:
            out = self._materialised(graph, x_src, edge_attr)
        if self.root_weight and x_dst is not None:
            out = out + self.lin(x_dst)
        return out if self.bias is None else out + self.bias

    def _edge_network_error(self, output: str) -> ValueError:
        return ValueError(
            f"nn gives {output}, but NNConv({self.in_channels}, {self.out_channels}) needs "
            f"{'in_channels' if isinstance(self.in_channels, int) else 'source channels'} * "
            f"out_channels = {self.in_channels_l * self.out_channels} per edge"
        )

    def _messages(self, edge_attr: Tensor, x_src: Tensor) -> Tensor:
        theta = self.nn(edge_attr)
        edges = x_src.size(0)
        if theta.numel() != edges * self.in_channels_l * self.out_channels:
            raise self._edge_network_error(f"shape {list(theta.shape)} for {edges} edges")
        theta = theta.view(-1, self.in_channels_l, self.out_channels)
        return torch.bmm(x_src.unsqueeze(1), theta).squeeze(1)

    def _materialised(self, graph: Graph, x: Tensor, edge_attr: Tensor) -> Tensor:
        """PyG's computation with the per-edge matrices built a chunk of edges at a time."""
        per_edge = max(1, self.in_channels_l * self.out_channels * x.element_size())
        step = max(1, _FALLBACK_CHUNK_BYTES // per_edge)
        x_src = x[graph.col]
        chunks = [
            checkpoint(
                self._messages,
                edge_attr[e0 : e0 + step],
                x_src[e0 : e0 + step],
                use_reentrant=False,
            )
            for e0 in range(0, graph.num_edges, step)
        ]
        # No edges: the network still runs, on none, as in PyG, so that its parameters (and
        # edge_attr) get zero gradients rather than None (an optimizer skips a None).
        messages = torch.cat(chunks) if chunks else self._messages(edge_attr, x_src)
        out = x.new_zeros(graph.num_nodes, self.out_channels)
        index = graph.row.unsqueeze(1).expand_as(messages)
        if self.aggr == "max":
            return out.scatter_reduce(0, index, messages, "amax", include_self=False)
        out = out.index_add(0, graph.row, messages)
        if self.aggr == "mean":
            out = out / graph.in_degree.clamp(min=1).to(out.dtype).unsqueeze(1)
        return out

    def __repr__(self) -> str:  # PyG's, one line with the edge network inside
        return (
            f"{type(self).__name__}({self.in_channels}, {self.out_channels}, aggr={self.aggr}, "
            f"nn={self.nn})"
        )
