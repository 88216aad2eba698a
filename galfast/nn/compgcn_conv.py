"""CompGCNConv: Vashishth et al.'s composition-based relational graph convolution on galfast's
fused relational aggregation."""

from __future__ import annotations

from typing import Callable, Optional, Union

import torch
from torch import Tensor
from torch.nn import Parameter

from galfast._args import check_choice, check_flag, check_int, check_real
from galfast.nn._layer_checks import check_callable, check_channels, check_features
from galfast.nn._pyg_compat import Unscriptable
from galfast.nn.compgcn_graphs import CompGCNGraphs, compgcn_graphs
from galfast.ops import compgcn_aggregate

__all__ = ["CompGCNConv", "compose"]

_COMPOSITIONS = ("sub", "mult", "corr")


def compose(x: Tensor, z: Tensor, composition: str) -> Tensor:
    """phi(x, z) row by row (z broadcast): ``x - z``, ``x * z`` or the circular correlation
    ``irfft(conj(rfft(x)) * rfft(z))``, as CompGCN's ``ccorr``."""
    if composition == "sub":
        return x - z
    if composition == "mult" or x.numel() == 0 or z.numel() == 0:
        # (an empty correlation is empty: MKL's FFT refuses zero rows or columns)
        return x * z
    spectrum = torch.fft.rfft(x, dim=-1).conj() * torch.fft.rfft(z, dim=-1)
    return torch.fft.irfft(spectrum, n=x.size(-1), dim=-1)


class CompGCNConv(Unscriptable):
    r"""The composition-based multi-relational graph convolution of Vashishth et al.,
    "Composition-based Multi-Relational Graph Convolutional Networks" (ICLR 2020), with the
    behaviour of the authors' ``CompGCNConv``.

    For triples :math:`(u, r, v)` and relation embeddings :math:`z`
    (``2 * num_relations`` rows: relation :math:`r` and its inverse :math:`r + R`):

    .. math::
        h_v = \tfrac13 \big(\mathrm{drop}(\textstyle\sum_{(v, r, u)} n^{in}_{uv}
              \phi(x_u, z_r) W_{in}) + \mathrm{drop}(\textstyle\sum_{(u, r, v)} n^{out}_{uv}
              \phi(x_u, z_{r + R}) W_{out}) + \phi(x_v, z_{loop}) W_{loop}\big) + b,
        \qquad x'_v = \mathrm{act}(\mathrm{BN}(h_v)), \qquad z' = z W_{rel}

    where :math:`\phi` is ``"sub"`` (:math:`x - z`), ``"mult"`` (:math:`x \odot z`) or
    ``"corr"`` (circular correlation), and :math:`n_{uv} = 1/\sqrt{d_u d_v}` with the in-degrees
    of each direction's graph (0 for a node without any), as the reference's ``compute_norm``.
    The head of a triple aggregates from its tail (``W_in``); the tail from its head through
    the inverse relation (``W_out``); every node from itself through a learned self-loop
    relation (``W_loop``). The sums run in galfast's fused kernel (no per-edge tensor); the
    weight matrices apply after aggregation (equal by linearity).

    Args:
        in_channels: input features per entity (and relation).
        out_channels: output features per entity (and relation).
        num_relations: relations ``R`` of the knowledge graph, without inverses.
        composition: ``"sub"``, ``"mult"`` or ``"corr"``. Default ``"corr"`` (the reference's).
        dropout: dropout on the two neighbour terms (not the self loop). Default 0.1.
        bias: learn an additive bias before batch norm. Default False (the reference's).
        batch_norm: batch-normalise the output (the reference always does). Default True.
        act: activation applied last (the reference's model passes ``torch.tanh``); identity
            when None.

    Shapes:
        ``forward(x, edge_index, edge_type, rel)``: x ``[N, in_channels]``; ``edge_index``
        ``[2, T]`` (head, tail) of the T triples *without* inverses, ``edge_type`` ``[T]`` in
        ``[0, R)`` (the layer adds the inverse direction, as CompGCN's data loader does; build
        it once with :func:`galfast.nn.compgcn_graphs` and pass that instead of ``edge_index``
        to skip even the cache look-up, ``edge_type`` then None); ``rel``
        ``[2R, in_channels]`` -> ``(x' [N, out_channels], z' [2R, out_channels])``.

    Example:
        >>> conv = CompGCNConv(8, 16, num_relations=2, composition="sub")
        >>> x, rel = torch.randn(3, 8), torch.randn(4, 8)
        >>> triples = torch.tensor([[0, 1], [1, 2]]), torch.tensor([0, 1])
        >>> [t.shape for t in conv(x, *triples, rel)]
        [torch.Size([3, 16]), torch.Size([4, 16])]
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        num_relations: int,
        composition: str = "corr",
        dropout: float = 0.1,
        bias: bool = False,
        batch_norm: bool = True,
        act: Optional[Callable[[Tensor], Tensor]] = None,
    ) -> None:
        super().__init__()
        in_channels, out_channels = check_channels(in_channels, out_channels)
        num_relations = check_int("num_relations", num_relations, 0)
        composition = check_choice("composition", composition, _COMPOSITIONS)
        dropout = check_real("dropout", dropout, 0.0, 1.0)
        bias, batch_norm = check_flag("bias", bias), check_flag("batch_norm", batch_norm)
        act = None if act is None else check_callable("act", act)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.num_relations, self.composition, self.act = num_relations, composition, act

        def weight() -> Parameter:
            return Parameter(torch.empty(in_channels, out_channels))

        self.w_in, self.w_out, self.w_loop, self.w_rel = weight(), weight(), weight(), weight()
        self.loop_rel = Parameter(torch.empty(1, in_channels))
        self.drop = torch.nn.Dropout(dropout)
        self.bias = Parameter(torch.empty(out_channels)) if bias else None
        self.bn = torch.nn.BatchNorm1d(out_channels) if batch_norm else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-normal weights and self-loop relation, as the reference's ``get_param``."""
        for p in (self.w_in, self.w_out, self.w_loop, self.w_rel, self.loop_rel):
            torch.nn.init.xavier_normal_(p)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)
        if self.bn is not None:
            self.bn.reset_parameters()

    def forward(
        self,
        x: Tensor,
        edge_index_or_graphs: Union[Tensor, CompGCNGraphs],
        edge_type: Optional[Tensor],
        rel: Tensor,
    ) -> tuple[Tensor, Tensor]:
        check_features(x, self.in_channels, self.w_in)
        graphs = self._graphs(edge_index_or_graphs, edge_type, x.size(0))
        if not isinstance(rel, Tensor):
            raise ValueError(f"rel must be a torch.Tensor, got {type(rel).__name__}")
        rows = 2 * self.num_relations
        if rel.shape != (rows, self.in_channels):
            raise ValueError(
                f"rel must have shape [{rows}, {self.in_channels}] (2 * num_relations: each "
                f"relation and its inverse, in_channels), got {list(rel.shape)}"
            )
        kwargs = {"composition": self.composition, "norm": "gcn"}
        h_in = compgcn_aggregate(graphs.incoming, x, rel, **kwargs) @ self.w_in
        h_out = compgcn_aggregate(graphs.outgoing, x, rel, **kwargs) @ self.w_out
        h_loop = compose(x, self.loop_rel, self.composition) @ self.w_loop
        # Dropout on the in, then the out term, in the reference's order (same masks per seed).
        out = (self.drop(h_in) + self.drop(h_out) + h_loop) * (1 / 3)
        if self.bias is not None:
            out = out + self.bias
        if self.bn is not None:
            out = self.bn(out)
        if self.act is not None:
            out = self.act(out)
        return out, rel @ self.w_rel

    def _graphs(
        self, edge_index_or_graphs: Union[Tensor, CompGCNGraphs], edge_type, num_nodes: int
    ) -> CompGCNGraphs:
        if isinstance(edge_index_or_graphs, CompGCNGraphs):
            graphs = edge_index_or_graphs
            if graphs.num_relations != self.num_relations:
                raise ValueError(
                    f"the graphs have {graphs.num_relations} relations but the layer "
                    f"{self.num_relations}"
                )
            if graphs.incoming.num_nodes != num_nodes:
                raise ValueError(
                    f"x has {num_nodes} rows but the graph has {graphs.incoming.num_nodes} nodes"
                )
            return graphs
        if not isinstance(edge_index_or_graphs, Tensor):
            raise ValueError(
                "expected an edge_index tensor [2, num_triples] or galfast.nn.compgcn_graphs(...), "
                f"got {type(edge_index_or_graphs).__name__}"
            )
        if edge_type is None:
            raise ValueError("edge_type is required with an edge_index")
        return compgcn_graphs(edge_index_or_graphs, edge_type, num_nodes, self.num_relations)

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, num_relations={self.num_relations}, "
            f"composition={self.composition!r}"
        )
