"""The encoders of the paper's setups, built from ``galfast.nn`` layers by name."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from galfast._args import check_int
from galfast.graph import Graph
from galfast.models import EmbeddingEncoder
from galfast.nn import ChebConv, GATConv, GCNConv, GINConv, SAGEConv, layer_graphs

__all__ = ["ENCODERS", "GNNStack", "make_conv", "make_encoder"]
__all__ += ["MOLECULE_ENCODERS"]

ENCODERS = ("gcn", "gat", "cheb", "sage", "gin")
# Encoders of whole molecules (edge features, a Set2Set readout): QM9's MPNN
# (galfast.models.MPNN, built by the qm9 setup).
MOLECULE_ENCODERS = ("mpnn",)


def make_conv(kind: str, in_dim: int, out_dim: int) -> nn.Module:
    """One message-passing layer ``conv(h, graph)``: ChebNet uses K = 2 as in the paper, GAT one
    head, GIN a two-layer MLP."""
    # As ints (NumPy's too, which the layers refuse); GIN's nn.Linear would take True, fail
    # deep in torch on -1 or 2.5, and build an empty layer for 0.
    in_dim, out_dim = check_int("in_dim", in_dim, 1), check_int("out_dim", out_dim, 1)
    if kind == "gcn":
        return GCNConv(in_dim, out_dim)
    if kind == "gat":
        return GATConv(in_dim, out_dim, heads=1)
    if kind == "cheb":
        return ChebConv(in_dim, out_dim, K=2)
    if kind == "sage":
        return SAGEConv(in_dim, out_dim)
    if kind == "gin":
        return GINConv(
            nn.Sequential(nn.Linear(in_dim, out_dim), nn.ReLU(), nn.Linear(out_dim, out_dim))
        )
    raise ValueError(f"unknown encoder {kind!r}; expected one of {ENCODERS}")


class GNNStack(nn.Module):
    """Message-passing layers over node features with ReLU between them (not after the last):
    ``forward(x [N, F], graph) -> [N, D]``, or on a mini-batch's sampled blocks
    ``forward(x [num_src of blocks[-1], F], blocks) -> [num_seeds, D]``. ``input_rows`` and
    ``layer`` run it layer by layer (the trainer's chunked ``embed``)."""

    def __init__(self, convs: Sequence[nn.Module]) -> None:
        super().__init__()
        self.convs = nn.ModuleList(convs)

    def forward(self, x: Tensor, graph: Graph) -> Tensor:
        for i, layer_graph in enumerate(layer_graphs(graph, len(self.convs))):
            x = self.layer(i, x, layer_graph)
        return x

    @property
    def num_layers(self) -> int:
        return len(self.convs)

    def input_rows(self, x: Tensor) -> Tensor:
        """The first layer's input for some nodes' encoder inputs (here the features)."""
        return x

    def layer(self, i: int, h: Tensor, graph) -> Tensor:
        """Layer ``i`` (with its activation) on a Graph or a Block."""
        h = self.convs[i](h, graph)
        return h.relu() if i < len(self.convs) - 1 else h


def make_encoder(
    kind: str, widths: Sequence[int], *, num_features: int, num_nodes: int, embedding_dim: int
) -> nn.Module:
    """``widths`` layer sizes (Planetoid: 128, 64; MovieLens: 20). With ``num_features > 0``
    the layers read the node features; with 0 (MovieLens, structure-only PubMed) they read a
    learned ``embedding_dim``-wide embedding per node, BatchNorm-ed as in the paper."""
    if not isinstance(widths, Sequence) or isinstance(widths, str):
        raise ValueError(f"widths must be a sequence of layer sizes, got {widths!r}")
    # -1 would be read as "no features" and build a learned-embedding encoder instead.
    num_features = check_int("num_features", num_features, 0)
    if num_features > 0:
        # No layer would be an identity "encoder" with no parameters: embeddings = features.
        if not widths:
            raise ValueError("widths must name at least one layer size to encode features")
        dims = [num_features, *widths]
        return GNNStack([make_conv(kind, a, b) for a, b in zip(dims, dims[1:])])
    # Named here: the first layer would refuse it as its in_dim.
    embedding_dim = check_int("embedding_dim", embedding_dim, 1)
    dims = [embedding_dim, *widths]
    convs = [make_conv(kind, a, b) for a, b in zip(dims, dims[1:])]
    return EmbeddingEncoder(num_nodes, embedding_dim, convs)
