"""Mini-batches of whole graphs (molecules) for graph-level tasks: each batch merges its graphs
into one block-diagonal :class:`~galfast.Graph` with a vector saying which graph each node
belongs to."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Union, runtime_checkable

import torch
from torch import Tensor, nn

from galfast._args import check_flag
from galfast._dtypes import holds_integers
from galfast.gal.seeding import check_seed, derive_seed, seeded_generator
from galfast.graph import Graph
from galfast.nn._graph_input import csr_from_coo
from galfast.train.batch_indices import check_batch_size, index_batches

__all__ = ["GraphBatch", "GraphBatches", "GraphCollection"]


@dataclass(frozen=True, eq=False)
class GraphBatch:
    """Several small graphs merged into one block-diagonal :class:`~galfast.Graph`.

    Attributes:
        x: ``[n, F]`` node features of all graphs, stacked.
        graph: the merged graph on ``n`` nodes.
        batch: ``[n]`` int64 position (0..B-1) of each node's graph within the batch.
        y: ``[B, ...]`` task targets per graph.
        ids: ``[B]`` int64 dataset index of each graph (sensitive attributes are keyed by it).
        edge_attr: optional ``[e, D]`` edge features in ``graph``'s CSR edge order.
    """

    x: Tensor
    graph: Graph
    batch: Tensor
    y: Tensor
    ids: Tensor
    edge_attr: Optional[Tensor] = None

    def to(self, device) -> GraphBatch:
        return GraphBatch(
            self.x.to(device),
            self.graph.to(device),
            self.batch.to(device),
            self.y.to(device),
            self.ids.to(device),
            None if self.edge_attr is None else self.edge_attr.to(device),
        )

    def encode(self, encoder: nn.Module) -> tuple[Tensor, Tensor]:
        """The trainer's hook for batches that bring their own graph: returns the per-graph
        embeddings ``[B, D]`` and the ids their rows belong to. The encoder is called as
        ``encoder(x, graph, batch)``, or ``encoder(x, graph, batch, edge_attr=edge_attr)``
        when the batch has edge features (an MPNN's edge network input)."""
        if self.edge_attr is None:
            return encoder(self.x, self.graph, self.batch), self.ids
        return encoder(self.x, self.graph, self.batch, edge_attr=self.edge_attr), self.ids


@runtime_checkable
class GraphCollection(Protocol):
    """Graphs stored together (e.g. ``galfast.datasets.MoleculeDataset``): ``len`` graphs and
    ``batch(indices)`` merging some of them into an object with ``x``, ``graph`` (a
    :class:`~galfast.Graph`), ``batch`` and optionally ``edge_attr`` in ``graph``'s CSR
    edge order."""

    def __len__(self) -> int: ...

    def batch(self, indices: Tensor) -> Any: ...


def _check_graph_objects(graphs: Sequence[Any]) -> None:
    """Each graph needs a 2-D ``x`` of the common width with at least one row and an integer
    ``[2, e]`` edge_index with ids in ``[0, rows)``: a batch merges them, where a wider x fails
    deep in torch.cat and an id past its graph silently joins the next graph's nodes."""
    width = None
    for i, g in enumerate(graphs):
        x, edge_index = getattr(g, "x", None), getattr(g, "edge_index", None)
        if not isinstance(x, Tensor) or not isinstance(edge_index, Tensor):
            raise ValueError(f"graph {i} lacks an x or edge_index tensor")
        if x.dim() != 2 or x.size(0) == 0:
            raise ValueError(f"graph {i}: x must be [num_nodes >= 1, F], got {list(x.shape)}")
        width = x.size(1) if width is None else width
        if x.size(1) != width:
            raise ValueError(f"graph {i}: x has {x.size(1)} features, graph 0 has {width}")
        if edge_index.dim() != 2 or edge_index.size(0) != 2 or not holds_integers(edge_index):
            raise ValueError(
                f"graph {i}: edge_index must be an integer [2, num_edges] tensor, got "
                f"{edge_index.dtype} {list(edge_index.shape)}"
            )
    _check_edge_features(graphs)
    edges = torch.cat([g.edge_index.long() for g in graphs], 1)
    counts = torch.tensor([g.edge_index.size(1) for g in graphs], device=edges.device)
    sizes = torch.tensor([g.x.size(0) for g in graphs], device=edges.device)
    bad = (edges.min(0).values < 0) | (edges.max(0).values >= sizes.repeat_interleave(counts))
    if bool(bad.any()):
        edge = int(bad.nonzero()[0])
        graph = int(torch.searchsorted(counts.cumsum(0), edge, right=True))
        raise ValueError(
            f"graph {graph}: edge_index holds node id(s) {edges[:, edge].tolist()} outside "
            f"[0, {int(sizes[graph])})"
        )


def _check_edge_features(graphs: Sequence[Any]) -> None:
    """``edge_attr`` on every graph or on none, each ``[e_i, ...]`` with the same trailing
    shape: a batch of graphs with and without would give the encoder features for some edges
    only."""
    attrs = [getattr(g, "edge_attr", None) for g in graphs]
    if all(a is None for a in attrs):
        return
    having = next(i for i, a in enumerate(attrs) if a is not None)
    for i, (g, attr) in enumerate(zip(graphs, attrs)):
        if not isinstance(attr, Tensor):
            raise ValueError(
                f"edge_attr must be on every graph or on none: graph {having} has one, graph "
                f"{i} has {'none' if attr is None else type(attr).__name__}"
            )
        if attr.dim() < 1 or attr.size(0) != g.edge_index.size(1):
            raise ValueError(
                f"graph {i}: edge_attr must have one row per edge ({g.edge_index.size(1)}), got "
                f"shape {list(attr.shape)}"
            )
        if attr.shape[1:] != attrs[0].shape[1:]:
            raise ValueError(
                f"graph {i}: edge_attr rows of shape {list(attr.shape[1:])}, graph 0's "
                f"{list(attrs[0].shape[1:])}"
            )


def _merge_graph_objects(parts: Sequence[Any]) -> tuple[Tensor, Graph, Tensor, Optional[Tensor]]:
    sizes = torch.tensor([p.x.size(0) for p in parts])
    offsets = torch.cumsum(sizes, 0) - sizes
    edges = torch.cat([p.edge_index.long() + int(o) for p, o in zip(parts, offsets)], 1)
    x = torch.cat([p.x for p in parts])
    batch = torch.repeat_interleave(torch.arange(len(parts)), sizes).to(x.device)
    if getattr(parts[0], "edge_attr", None) is None:
        return x, Graph.from_edge_index(edges, int(sizes.sum())), batch, None
    # Edge features follow their edges into CSR order; parallel edges stay apart, as in PyG
    # (each has its own features, which no coalescing could merge).
    graph, order = csr_from_coo(edges[1], edges[0], int(sizes.sum()))
    return x, graph, batch, torch.cat([p.edge_attr for p in parts])[order.to(x.device)]


class GraphBatches:
    """Re-iterable mini-batches of whole graphs for graph-level tasks (QM9-style): every epoch
    each selected graph appears in exactly one batch.

    Args:
        graphs: a :class:`GraphCollection` (``MoleculeDataset``: arrays and offsets, batched
            without a Python object per graph), or a sequence of objects with ``x``
            ``[n_i, F]`` and ``edge_index`` ``[2, e_i]`` (e.g. ``torch_geometric.data.Data``),
            and optionally ``edge_attr`` ``[e_i, D]`` on every one (given to the encoder in
            the merged graph's CSR edge order, parallel edges kept).
        y: ``[G, ...]`` one task target per graph of `graphs` (e.g. normalised ``mu``).
        batch_size: graphs per batch (128 in the paper's QM9 runs).
        shuffle: reshuffle every epoch.
        index: ``[K]`` int64 the graphs to iterate over (a split); default all.
        seed: None: shuffle with torch's global generator (``GALTrainer`` seeds it every
            epoch, so runs are reproducible and resumable). An int: epoch ``e`` (the ``e``-th
            iteration, or as set by :meth:`set_epoch`) uses an order that is a pure function
            of ``(seed, e)``, independent of any global state.
        transform: applied to each collection batch before it is returned (e.g.
            ``galfast.datasets.complete_graph`` for PyG's complete graphs with distances).

    The encoder receives ``(x, graph, batch)``, plus ``edge_attr=`` when the batches carry
    edge features, and returns one embedding per graph; ``GraphBatch.ids`` are positions in
    `graphs`, the rows a graph-level ``SensitiveAttribute`` is keyed by.

    Example:
        >>> ds = galfast.datasets.qm9()
        >>> train, val, test = galfast.datasets.paper_split(len(ds))
        >>> batches = GraphBatches(ds, ds.target("mu"), index=train, seed=0)
        >>> first = next(iter(batches))          # 128 molecules
    """

    def __init__(
        self,
        graphs: Union[GraphCollection, Sequence[Any]],
        y: Tensor,
        batch_size: int = 128,
        shuffle: bool = True,
        *,
        index: Optional[Tensor] = None,
        seed: Optional[int] = None,
        transform: Optional[Callable[[Any], Any]] = None,
    ) -> None:
        self.collection = callable(getattr(graphs, "batch", None)) and hasattr(graphs, "__len__")
        if not isinstance(y, Tensor) or y.dim() == 0:
            raise ValueError(f"y must be a tensor with one row per graph, got {y!r}")
        if len(graphs) != y.size(0):
            raise ValueError(f"y has {y.size(0)} rows for {len(graphs)} graphs")
        if not self.collection:
            graphs = list(graphs)
            if graphs:
                _check_graph_objects(graphs)
            if transform is not None:
                raise ValueError("transform applies to graph collections (with .batch()) only")
        batch_size, shuffle = check_batch_size(batch_size), check_flag("shuffle", shuffle)
        if index is None:
            index = torch.arange(len(graphs))
        if (
            not isinstance(index, Tensor)
            or index.dim() != 1
            or not holds_integers(index)  # a bool mask would be read as positions 0 and 1
        ):
            raise ValueError("index must be a 1-D integer tensor of graph positions")
        if index.numel() and (int(index.min()) < 0 or int(index.max()) >= len(graphs)):
            raise ValueError(f"index holds a graph position outside [0, {len(graphs)})")
        if torch.unique(index).numel() != index.numel():
            raise ValueError("index holds a graph position twice")
        if seed is not None:
            seed = check_seed("seed", seed)
        self.graphs, self.y, self.index = graphs, y, index.long().cpu()
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed
        self.transform, self.epoch = transform, 0

    def __len__(self) -> int:
        size = self.batch_size or max(self.index.numel(), 1)
        return -(-self.index.numel() // size)

    def set_epoch(self, epoch: int) -> None:
        """With a `seed`: the next iteration draws epoch `epoch`'s order (``GALTrainer.fit``
        calls it with its own epoch before each one, so a resumed run replays its orders)."""
        self.epoch = int(epoch)

    def _generator(self) -> Optional[torch.Generator]:
        if self.seed is None:
            return None
        generator = seeded_generator(derive_seed(self.seed, "graph_batches", self.epoch))
        self.epoch += 1
        return generator

    def _merge(self, ids: Tensor) -> GraphBatch:
        if not self.collection:
            x, graph, batch, edge_attr = _merge_graph_objects(
                [self.graphs[i] for i in ids.tolist()]
            )
            y = self.y[ids.to(self.y.device)]
            return GraphBatch(x, graph, batch, y, ids.to(x.device), edge_attr)
        merged = self.graphs.batch(ids)
        if self.transform is not None:
            merged = self.transform(merged)
        device = merged.x.device
        return GraphBatch(
            merged.x,
            merged.graph,
            merged.batch,
            self.y[ids.to(self.y.device)].to(device),
            ids.to(device),
            getattr(merged, "edge_attr", None),
        )

    def __iter__(self) -> Iterator[GraphBatch]:
        generator = self._generator()
        for chunk in index_batches(self.index.numel(), self.batch_size, self.shuffle, generator):
            yield self._merge(self.index[chunk])
