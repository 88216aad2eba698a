"""A sampled bipartite block (one GNN layer of a mini-batch) and aggregation over it."""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch
from torch import Tensor

from galfast._args import check_choice, check_device
from galfast._dtypes import accumulation_dtype, check_float_dtype
from galfast._native import _C
from galfast._versions import check_unedited, tensor_versions
from galfast.graph import Graph, _count, _index_tensor, cached_derived, check_csr
from galfast.ops.aggregate import _MAX, _SUM, apply_aggregate, check_edge_weight, weight_like

__all__ = ["Block", "block_aggregate"]

_REDUCES = ("sum", "mean", "max")
_PICKLED_FIELDS = {"num_dst", "src_nodes", "rowptr", "col", "edge_id", "graph"}


class Block:
    """One layer of a sampled computation graph: a bipartite CSR from ``num_src`` source nodes
    to ``num_dst`` destination nodes, in local ids.

    Local id ``k`` is the graph node ``src_nodes[k]``. The destinations come first (local ids
    ``0 .. num_dst - 1``, the layer's target nodes in their given order), then every other
    sampled source in order of first appearance in ``col`` (the order PyG and DGL use). Row
    ``i`` of the CSR, ``col[rowptr[i] : rowptr[i + 1]]``, lists the local ids of the sampled
    in-neighbours of destination ``i``; ``edge_id`` gives each sampled edge's position in the
    graph's CSR order (to gather ``graph.edge_weight`` or edge features). Immutable; derived
    structure (the transpose for backward) is cached on it. Blocks made by
    :func:`~galfast.ops.sample_neighbors` keep a reference to the graph they were sampled from
    (``graph``), from which layers that normalise by whole-graph degrees (GCN, Chebyshev) read
    them.

    Attributes:
        num_dst: number of destination nodes.
        src_nodes: ``[num_src]`` int64 graph ids; ``src_nodes[:num_dst]`` are the destinations.
        rowptr: ``[num_dst + 1]`` int64 offsets into ``col``.
        col: ``[num_edges]`` int64 local source ids, in ``[0, num_src)``.
        edge_id: ``[num_edges]`` int64 positions in the graph's CSR order.
        graph: the sampled :class:`~galfast.Graph`, or None.
    """

    def __init__(
        self,
        num_dst: int,
        src_nodes: Tensor,
        rowptr: Tensor,
        col: Tensor,
        edge_id: Tensor,
        graph: Optional[Graph] = None,
    ) -> None:
        num_dst = _count("num_dst", num_dst)
        src_nodes, rowptr, col, edge_id = (
            _index_tensor(name, t)
            for name, t in (
                ("src_nodes", src_nodes),
                ("rowptr", rowptr),
                ("col", col),
                ("edge_id", edge_id),
            )
        )
        if src_nodes.dim() != 1 or src_nodes.numel() < num_dst:
            raise ValueError(
                f"src_nodes must be 1-D with at least num_dst = {num_dst} entries (the "
                f"destinations come first), got shape {list(src_nodes.shape)}"
            )
        check_csr(rowptr, col, num_dst, src_nodes.numel())
        if edge_id.shape != col.shape:
            raise ValueError(
                f"edge_id must have shape {list(col.shape)}, got {list(edge_id.shape)}"
            )
        if graph is not None and not isinstance(graph, Graph):
            raise ValueError(f"graph must be a galfast.Graph or None, got {type(graph).__name__}")
        for name, t in (("src_nodes", src_nodes), ("edge_id", edge_id)):
            if t.device != col.device:
                raise ValueError(f"{name} is on {t.device} but col is on {col.device}")
        _check_graph_ids(num_dst, src_nodes, edge_id, graph)
        self._init(num_dst, src_nodes, rowptr, col, edge_id, graph)

    def _init(self, num_dst, src_nodes, rowptr, col, edge_id, graph) -> None:
        self._num_dst, self._src_nodes = num_dst, src_nodes
        self._rowptr, self._col, self._edge_id = rowptr, col, edge_id
        self._graph = graph
        self._versions = self._tensor_versions()
        self._cache: dict[Any, Any] = {}

    # A pickle (a DataLoader worker's batch, torch.save) carries the tensors, not the cache
    # nor the version counters, which unpickled tensors restart; it is checked as a new block
    # is, since it may come from elsewhere or have been edited.
    def __getstate__(self) -> dict[str, Any]:
        return {
            "num_dst": self._num_dst,
            "src_nodes": self._src_nodes,
            "rowptr": self._rowptr,
            "col": self._col,
            "edge_id": self._edge_id,
            "graph": self._graph,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or state.keys() != _PICKLED_FIELDS:
            raise ValueError(f"a Block's pickled state is a dict of {sorted(_PICKLED_FIELDS)}")
        Block.__init__(self, **state)

    @classmethod
    def _trusted(cls, num_dst, src_nodes, rowptr, col, edge_id, graph) -> Block:
        """A block from tensors made valid by construction (the sampler's): none of the
        checks, which read the indices (on a GPU, host synchronisations)."""
        block = cls.__new__(cls)
        block._init(num_dst, src_nodes, rowptr, col, edge_id, graph)
        return block

    def _tensor_versions(self) -> tuple[Optional[int], ...]:
        return tensor_versions((self._src_nodes, self._rowptr, self._col, self._edge_id))

    def check_unmodified(self) -> None:
        """Raises ValueError when one of the block's tensors was modified in place since the
        block was made: its cached transpose and int32 copy would disagree with it."""
        if not torch.compiler.is_compiling():
            names = ("src_nodes", "rowptr", "col", "edge_id")
            now, remedy = self._tensor_versions(), "Blocks are immutable: make a new one"
            check_unedited("Block", names, now, self._versions, remedy)

    num_dst = property(lambda self: self._num_dst, doc="Number of destination nodes.")
    src_nodes = property(lambda self: self._src_nodes, doc="[num_src] graph ids of local ids.")
    rowptr = property(lambda self: self._rowptr, doc="[num_dst + 1] offsets into col.")
    col = property(lambda self: self._col, doc="[num_edges] local source ids.")
    edge_id = property(lambda self: self._edge_id, doc="[num_edges] graph CSR positions.")
    graph = property(lambda self: self._graph, doc="The sampled Graph (None if not known).")

    @property
    def num_src(self) -> int:
        return self._src_nodes.numel()

    @property
    def num_edges(self) -> int:
        return self._col.numel()

    @property
    def dst_nodes(self) -> Tensor:
        """``[num_dst]`` graph ids of the destinations (a view of ``src_nodes``)."""
        return self._src_nodes[: self._num_dst]

    @property
    def device(self) -> torch.device:
        return self._col.device

    def __repr__(self) -> str:
        return (
            f"Block(num_dst={self.num_dst}, num_src={self.num_src}, "
            f"num_edges={self.num_edges}, device={self.device})"
        )

    def to(self, device: Any) -> Block:
        """A copy on `device` (caches are rebuilt there on demand)."""
        device = check_device(device)
        if device == self.device:
            return self
        self.check_unmodified()
        return Block._trusted(
            self._num_dst,
            *(t.to(device) for t in (self._src_nodes, self._rowptr, self._col, self._edge_id)),
            None if self._graph is None else self._graph.to(device),
        )

    def cached(self, key: Any, build: Callable[[], Any]) -> Any:
        """The value cached under `key`, built once: every derived tensor (transpose, int32
        copy, graphs) goes through here, so an edited block is refused here."""
        self.check_unmodified()
        return cached_derived(self._cache, key, build, "Block")

    @property
    def row(self) -> Tensor:
        """``[num_edges]`` local destination of each edge."""
        return self.cached(
            "row",
            lambda: torch.repeat_interleave(
                torch.arange(self._num_dst, device=self.device), self._rowptr.diff()
            ),
        )

    @property
    def in_degree(self) -> Tensor:
        """``[num_dst]`` sampled edges per destination."""
        return self.cached("in_degree", lambda: self._rowptr.diff())

    def transpose(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(colptr [num_src + 1], row [num_edges], edge_pos [num_edges])``: the edges grouped by
        local source, each slot's destination and its position in the block's CSR order."""

        def build():
            edge_pos = torch.argsort(self._col, stable=True)
            counts = torch.bincount(self._col, minlength=self.num_src)
            colptr = torch.zeros(self.num_src + 1, dtype=torch.long, device=self.device)
            colptr[1:] = torch.cumsum(counts, 0)
            return colptr, self.row[edge_pos], edge_pos

        return self.cached("transpose", build)

    def hub_rows(self, transposed: bool = False) -> Tensor:
        """Rows above the CUDA aggregation kernel's hub threshold (reduced by a whole block)."""

        def build():
            ptr = self.transpose()[0] if transposed else self._rowptr
            return (ptr.diff() > _C.HUB_DEGREE).nonzero().view(-1)

        return self.cached(("hub_rows", transposed), build)

    def as_graph(self) -> Graph:
        """The block as a square :class:`~galfast.Graph` on its ``num_src`` local nodes, where
        rows ``num_dst ..`` are empty: for layers that take a Graph, whose output's first
        ``num_dst`` rows are then the destinations' (the other rows are wasted work)."""

        def build():
            rowptr = torch.cat(
                [self._rowptr, self._rowptr[-1:].expand(self.num_src - self.num_dst)]
            )
            return Graph(rowptr, self._col, self.num_src)

        return self.cached("graph", build)

    def as_bipartite_graph(self) -> Graph:
        """The block as a bipartite :class:`~galfast.Graph` from its ``num_src`` local nodes to
        its ``num_dst`` destinations (a plain Graph when the two counts agree): what layers
        taking bipartite inputs ``(x_src, x_dst)`` aggregate over."""

        def build():
            num_src = self.num_src if self.num_src != self.num_dst else None
            return Graph(self._rowptr, self._col, self.num_dst, num_src_nodes=num_src)

        return self.cached("bipartite_graph", build)


def _check_graph_ids(
    num_dst: int, src_nodes: Tensor, edge_id: Tensor, graph: Optional[Graph]
) -> None:
    """ValueError unless the block's graph ids are ids of ``graph`` (any ids >= 0 without
    one): layers index the features, the graph's degrees and its edge weights with them, and
    a negative id would silently read the last node's or edge's."""
    bounds = (
        (None, None, None)
        if graph is None
        else (graph.num_src_nodes, graph.num_nodes, graph.num_edges)
    )
    named = (("src_nodes", src_nodes), ("dst_nodes", src_nodes[:num_dst]), ("edge_id", edge_id))
    for (name, ids), bound in zip(named, bounds):
        if ids.numel() == 0:
            continue
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or (bound is not None and high >= bound):
            where = "ids are >= 0" if bound is None else f"the block's graph has [0, {bound})"
            raise ValueError(f"{name} holds {low if low < 0 else high}, not an id ({where})")


def _check_inputs(block: Block, x: Tensor, edge_weight: Optional[Tensor], reduce: str) -> None:
    if not isinstance(block, Block):
        raise ValueError(f"block must be a galfast.ops.Block, got {type(block).__name__}")
    check_choice("reduce", reduce, _REDUCES)
    if not isinstance(x, Tensor):
        raise ValueError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2 or x.size(0) != block.num_src:
        raise ValueError(
            f"x must have shape [num_src = {block.num_src}, num_features], got {list(x.shape)}"
        )
    if x.device != block.device:
        raise ValueError(f"x is on {x.device} but the block is on {block.device}")
    if block.device.type not in ("cpu", "cuda"):
        raise ValueError(
            f"block_aggregate: galfast's kernels run on CPU and CUDA tensors, not on "
            f"{block.device.type}"
        )
    check_float_dtype("x", x)
    if edge_weight is not None:
        check_edge_weight(edge_weight, block.num_edges, x, "the block's edge order")


def block_aggregate(
    block: Block, x: Tensor, edge_weight: Optional[Tensor] = None, *, reduce: str = "sum"
) -> Tensor:
    r"""Aggregation over a sampled :class:`Block`: the bipartite form of
    :func:`~galfast.ops.aggregate`, on the same kernels.

    .. math::
        \mathrm{out}_i = \mathop{\mathrm{reduce}}_{e = (j \to i) \in \mathrm{block}}
        \; w_e\, x_j, \qquad i < \mathrm{num\_dst},\; j < \mathrm{num\_src}

    ``reduce="mean"`` divides the sum by the destination's sampled degree; ``"max"`` takes the
    feature-wise maximum; destinations without sampled edges give 0. A layer that normalises
    by the full graph's degrees (GCN) passes them through ``edge_weight``, e.g.
    ``deg_inv_sqrt[block.dst_nodes][block.row] * deg_inv_sqrt[block.src_nodes][block.col]``.

    Args:
        block: the :class:`Block`.
        x: ``[num_src, F]`` features of the block's local nodes (``x_all[block.src_nodes]``):
            float32/float64 on CPU; also float16/bfloat16 on CUDA.
        edge_weight: optional ``[num_edges]`` weights in the block's edge order (for the
            graph's own weights: ``graph.edge_weight[block.edge_id]``). Differentiable.
        reduce: ``"sum"``, ``"mean"`` or ``"max"``.

    Returns:
        ``[num_dst, F]`` tensor of x's dtype, differentiable in x and edge_weight (backward
        runs the same kernel on the block's cached transpose).

    Example:
        >>> blocks = sample_neighbors(graph, seeds, [10, 5], seed=0)
        >>> h = x[blocks[-1].src_nodes]
        >>> for block in reversed(blocks):
        ...     h = block_aggregate(block, h, reduce="mean")
        >>> h.shape[0] == seeds.numel()
        True
    """
    _check_inputs(block, x, edge_weight, reduce)
    x = x.contiguous()
    if edge_weight is not None:
        edge_weight = weight_like(edge_weight, x)
    row_scale = None
    if reduce == "mean":
        degree = block.in_degree.to(accumulation_dtype(x.dtype))
        row_scale = degree.reciprocal().masked_fill(degree == 0, 0.0)
    return apply_aggregate(
        block, x, edge_weight, row_scale, None, _MAX if reduce == "max" else _SUM
    )
