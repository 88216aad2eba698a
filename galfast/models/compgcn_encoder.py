"""The CompGCN encoder as CompGCN's authors (and GAL) build it: learned entity and relation
embeddings, then one or two CompGCNConv layers over the training triples."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

from galfast._args import check_fraction, check_int
from galfast._dtypes import as_int
from galfast.graph import Graph
from galfast.nn import CompGCNConv, CompGCNGraphs, compgcn_graphs

__all__ = ["CompGCNEncoder"]


class CompGCNEncoder(nn.Module):
    """Entity embeddings ``[N, dim]`` and relation embeddings ``[2R, dim]`` of a knowledge graph.

    As CompGCN's ``CompGCNBase``: Xavier-normal initial embeddings (entities ``init_dim`` wide,
    relations one row per relation and inverse, or ``num_bases`` shared bases mixed per relation),
    ``layers`` CompGCNConv layers with tanh (``init_dim -> dim``, or ``init_dim -> hidden_dim ->
    dim`` with two), dropout ``hidden_dropout`` on the entity output of every layer. Relations
    only pass through each layer's ``W_rel``, so they depend on the parameters alone, not on the
    graph: :meth:`relations` gives them without running the graph convolution.

    Args:
        num_entities, num_relations: ``N`` and ``R`` (without inverses).
        triples: ``[T, 3]`` int64 ``(head, relation, tail)`` training triples, without inverses
            (the layers add the inverse direction).
        dim: output width (CompGCN-ConvE: 200 = ``k_w * k_h``).
        init_dim: width of the learned initial embeddings (CompGCN: 100).
        hidden_dim: width between the layers with ``layers=2`` (CompGCN ``gcn_dim``: 200).
        layers: 1 (CompGCN's default) or 2.
        composition: ``"sub"``, ``"mult"`` or ``"corr"`` (CompGCN's default).
        num_bases: 0: one learned vector per relation; ``> 0``: that many basis vectors.
        conv_dropout: dropout inside each layer (CompGCN ``gcn_drop``: 0.1).
        hidden_dropout: dropout on each layer's entity output (CompGCN ``hid_drop``: 0.3).

    ``forward(ids, graph)`` follows :class:`~galfast.GALTrainer`'s encoder protocol: ``ids`` the
    node ids ``arange(N)`` (``fit(..., x=None)``), ``graph`` the dataset's graph (its node count
    is checked; the convolution runs on ``triples``), the entity embeddings out. :meth:`embed`
    returns both sides.

    Example:
        >>> enc = CompGCNEncoder(3, 1, torch.tensor([[0, 0, 1], [1, 0, 2]]), dim=8, init_dim=4)
        >>> z, rel = enc.embed()
        >>> z.shape, rel.shape
        (torch.Size([3, 8]), torch.Size([2, 8]))
    """

    def __init__(
        self,
        num_entities: int,
        num_relations: int,
        triples: Tensor,
        *,
        dim: int = 200,
        init_dim: int = 100,
        hidden_dim: int = 200,
        layers: int = 1,
        composition: str = "corr",
        num_bases: int = 0,
        conv_dropout: float = 0.1,
        hidden_dropout: float = 0.3,
    ) -> None:
        super().__init__()
        num_entities = check_int("num_entities", num_entities, 1)
        num_relations = check_int("num_relations", num_relations, 1)
        dim, init_dim, hidden_dim = (
            check_int("dim", dim, 1),
            check_int("init_dim", init_dim, 1),
            check_int("hidden_dim", hidden_dim, 1),
        )
        num_bases = check_int("num_bases", num_bases, 0)
        # 1.0 and True equal 1 but are no layer count (as_int refuses both).
        count = as_int(layers)
        if count not in (1, 2):
            raise ValueError(f"layers must be 1 or 2, got {layers!r}")
        layers = count
        # NaN passes nn.Dropout's check and fails at the first forward.
        conv_dropout = check_fraction("conv_dropout", conv_dropout)
        hidden_dropout = check_fraction("hidden_dropout", hidden_dropout)
        _check_triples(triples, num_entities, num_relations)
        self.num_entities, self.num_relations = num_entities, num_relations
        self.register_buffer("edge_index", triples[:, [0, 2]].t().contiguous(), persistent=False)
        self.register_buffer("edge_type", triples[:, 1].contiguous(), persistent=False)
        self.entity = nn.Parameter(torch.empty(num_entities, init_dim))
        rows = num_bases if num_bases else 2 * num_relations
        self.relation = nn.Parameter(torch.empty(rows, init_dim))
        self.basis_weight = (
            nn.Parameter(torch.empty(2 * num_relations, num_bases)) if num_bases else None
        )
        widths = [init_dim, dim] if layers == 1 else [init_dim, hidden_dim, dim]
        self.convs = nn.ModuleList(
            CompGCNConv(a, b, num_relations, composition, dropout=conv_dropout, act=torch.tanh)
            for a, b in zip(widths, widths[1:])
        )
        self.drop = nn.Dropout(hidden_dropout)
        self._graphs: Optional[tuple] = None  # (the edge buffers' key, CompGCNGraphs)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for p in (self.entity, self.relation, self.basis_weight):
            if p is not None:
                nn.init.xavier_normal_(p)
        for conv in self.convs:
            conv.reset_parameters()

    def _initial_relations(self) -> Tensor:
        if self.basis_weight is None:
            return self.relation
        return self.basis_weight @ self.relation

    def relations(self) -> Tensor:
        """``[2R, dim]``: relation ``r`` and its inverse ``r + R`` after every layer."""
        rel = self._initial_relations()
        for conv in self.convs:
            rel = rel @ conv.w_rel
        return rel

    def graphs(self) -> CompGCNGraphs:
        """The layers' graphs of the triples, built once per edge buffer (a move to another
        device replaces the buffer): ``compgcn_graphs`` compares a copy of every edge on each
        call to detect edits, ~50 ms a training step on FB15k-237's 272k triples, while the
        buffers are the encoder's own. torch.compile and torch.export trace the build instead:
        a cache on the module would be a side effect of the traced graph."""
        if torch.compiler.is_compiling():
            return compgcn_graphs(
                self.edge_index, self.edge_type, self.num_entities, self.num_relations
            )
        key = (
            id(self.edge_index),
            id(self.edge_type),
            self.edge_index._version,
            self.edge_type._version,
        )
        if self._graphs is None or self._graphs[0] != key:
            built = compgcn_graphs(
                self.edge_index, self.edge_type, self.num_entities, self.num_relations
            )
            # The buffers stay referenced here, so no other tensor can take their ids.
            self._graphs = (key, built, self.edge_index, self.edge_type)
        return self._graphs[1]

    def embed(self) -> tuple[Tensor, Tensor]:
        """``(entities [N, dim], relations [2R, dim])``."""
        graphs = self.graphs()
        x, rel = self.entity, self._initial_relations()
        for conv in self.convs:
            x, rel = conv(x, graphs, None, rel)
            x = self.drop(x)
        return x, rel

    def forward(self, ids: Optional[Tensor] = None, graph: Optional[Graph] = None) -> Tensor:
        if ids is not None and not isinstance(ids, Tensor):
            raise ValueError(f"ids must be a tensor of the entity ids, got {type(ids).__name__}")
        if graph is not None and not isinstance(getattr(graph, "num_nodes", None), int):
            raise ValueError(f"graph must be a Graph (or None), got {type(graph).__name__}")
        if ids is not None and (ids.dim() != 1 or ids.numel() != self.num_entities):
            raise ValueError(
                f"ids must be the {self.num_entities} entity ids (fit(..., x=None)); the "
                f"convolution needs every entity, got shape {list(ids.shape)}"
            )
        if graph is not None and graph.num_nodes != self.num_entities:
            raise ValueError(
                f"the graph has {graph.num_nodes} nodes but the encoder {self.num_entities} "
                "entities"
            )
        return self.embed()[0]


def _check_triples(triples: Tensor, num_entities: int, num_relations: int) -> None:
    if not isinstance(triples, Tensor) or triples.dim() != 2 or triples.size(1) != 3:
        shape = list(triples.shape) if isinstance(triples, Tensor) else type(triples).__name__
        raise ValueError(f"triples must be a [T, 3] tensor, got {shape}")
    if triples.dtype != torch.int64:
        raise ValueError(f"triples must be int64, got {triples.dtype}")
    if triples.numel() and (
        int(triples.min()) < 0
        or int(triples[:, [0, 2]].max()) >= num_entities
        or int(triples[:, 1].max()) >= num_relations
    ):
        raise ValueError(
            f"triples must hold entity ids in [0, {num_entities}) and relation ids in "
            f"[0, {num_relations})"
        )
