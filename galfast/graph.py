"""An immutable CSR graph (by destination) with lazily cached transpose, degrees and scales."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import torch
from torch import Tensor

__all__ = ["CSC", "Graph"]


class CSC(NamedTuple):
    """A graph's transpose (edges grouped by source). Slot ``s`` of source ``j``, for ``s`` in
    ``colptr[j] : colptr[j + 1]``, is the edge ``j -> row[s]``, found at position
    ``edge_id[s]`` of the CSR order; within a source, slots keep CSR order."""

    colptr: Tensor  # [num_nodes + 1] int64 slot offsets per source node
    row: Tensor  # [num_edges] int64 destination of each slot's edge (as Graph.row in CSR)
    edge_id: Tensor  # [num_edges] int64 CSR position of each slot's edge


def _check_index(edge_index: Any, num_nodes: Optional[int]) -> tuple[Tensor, int]:
    if not isinstance(edge_index, Tensor):
        raise ValueError(f"edge_index must be a torch.Tensor, got {type(edge_index).__name__}")
    if edge_index.dtype.is_floating_point or edge_index.dtype == torch.bool:
        raise ValueError(
            f"edge_index must hold integer node ids (int64 or int32), got {edge_index.dtype}"
        )
    if edge_index.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"edge_index must be int64 or int32, got {edge_index.dtype}")
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"edge_index must have shape [2, num_edges], got {list(edge_index.shape)}")
    edge_index = edge_index.long()
    if edge_index.numel() and int(edge_index.min()) < 0:
        raise ValueError(f"edge_index holds a negative node id ({int(edge_index.min())})")
    inferred = int(edge_index.max()) + 1 if edge_index.numel() else 0
    if num_nodes is None:
        num_nodes = inferred
    elif num_nodes < 0:
        raise ValueError(f"num_nodes must be >= 0, got {num_nodes}")
    elif inferred > num_nodes:
        raise ValueError(
            f"edge_index refers to node {inferred - 1} but num_nodes is {num_nodes} "
            f"(ids must lie in [0, {num_nodes}))"
        )
    return edge_index, int(num_nodes)


def _check_edge_values(name: str, values: Optional[Tensor], num_edges: int, device) -> None:
    if values is None:
        return
    if not isinstance(values, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(values).__name__}")
    if values.dim() != 1 or values.numel() != num_edges:
        raise ValueError(f"{name} must have shape [{num_edges}], got {list(values.shape)}")
    if values.device != device:
        raise ValueError(f"{name} is on {values.device} but edge_index is on {device}")


class Graph:
    """A directed graph stored as CSR by destination: row ``i`` lists the sources ``j`` of the
    edges ``j -> i`` (PyG convention: ``edge_index[0]`` = source, ``edge_index[1]`` = target).

    Immutable: derived structure (the CSC transpose, degrees, normalisation scales, hub lists)
    is computed on first use and cached on the object, so layers never hide graph state.

    Attributes:
        rowptr: ``[num_nodes + 1]`` int64 offsets into ``col``.
        col: ``[num_edges]`` int64 source node of each edge, sorted by (target, source).
        edge_weight: optional ``[num_edges]`` float weights in CSR edge order.
        edge_type: optional ``[num_edges]`` int64 relation ids in CSR edge order.

    Example:
        >>> g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 2]]), num_nodes=3)
        >>> g.num_nodes, g.num_edges
        (3, 2)
    """

    def __init__(
        self,
        rowptr: Tensor,
        col: Tensor,
        num_nodes: int,
        edge_weight: Optional[Tensor] = None,
        edge_type: Optional[Tensor] = None,
    ) -> None:
        if rowptr.numel() != num_nodes + 1:
            raise ValueError(f"rowptr must have {num_nodes + 1} entries, got {rowptr.numel()}")
        self.rowptr = rowptr
        self.col = col
        self.num_nodes = int(num_nodes)
        self.edge_weight = edge_weight
        self.edge_type = edge_type
        self._cache: dict[Any, Any] = {}

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_edge_index(
        cls,
        edge_index: Tensor,
        num_nodes: Optional[int] = None,
        edge_weight: Optional[Tensor] = None,
        *,
        edge_type: Optional[Tensor] = None,
        symmetrize: bool = False,
        add_self_loops: bool = False,
    ) -> Graph:
        """Builds the CSR from a ``[2, E]`` edge list.

        Duplicate edges (same source, target and type) are coalesced, their weights summed.
        ``symmetrize`` adds every reverse edge; ``add_self_loops`` gives each node that lacks one
        a self loop of weight 1 (PyG's ``add_remaining_self_loops``). Building is differentiable
        in ``edge_weight``.
        """
        edge_index, num_nodes = _check_index(edge_index, num_nodes)
        num_edges = edge_index.size(1)
        _check_edge_values("edge_weight", edge_weight, num_edges, edge_index.device)
        _check_edge_values("edge_type", edge_type, num_edges, edge_index.device)
        if edge_weight is not None:
            if not edge_weight.dtype.is_floating_point:
                raise ValueError(f"edge_weight must be floating point, got {edge_weight.dtype}")
            if not torch.compiler.is_compiling() and not bool(torch.isfinite(edge_weight).all()):
                raise ValueError("edge_weight contains NaN or infinite values")
        if edge_type is not None:
            if edge_type.dtype not in (torch.int64, torch.int32):
                raise ValueError(f"edge_type must be int64 or int32, got {edge_type.dtype}")
            edge_type = edge_type.long()
            if edge_type.numel() and int(edge_type.min()) < 0:
                raise ValueError("edge_type holds a negative relation id")

        src, dst = edge_index[0], edge_index[1]
        if symmetrize:
            src, dst = torch.cat([src, dst]), torch.cat([dst, src])
            edge_weight = None if edge_weight is None else torch.cat([edge_weight, edge_weight])
            edge_type = None if edge_type is None else torch.cat([edge_type, edge_type])
        if add_self_loops:
            has_loop = torch.zeros(num_nodes, dtype=torch.bool, device=src.device)
            has_loop[src[src == dst]] = True
            missing = (~has_loop).nonzero().view(-1)
            src, dst = torch.cat([src, missing]), torch.cat([dst, missing])
            if edge_weight is not None:
                ones = edge_weight.new_ones(missing.numel())
                edge_weight = torch.cat([edge_weight, ones])
            if edge_type is not None:
                edge_type = torch.cat([edge_type, edge_type.new_zeros(missing.numel())])

        # Sort by (target, source, type) and merge equal keys.
        key = dst * num_nodes + src
        if edge_type is not None:
            num_types = int(edge_type.max()) + 1 if edge_type.numel() else 1
            key = key * num_types + edge_type
        unique_key, inverse = torch.unique(key, sorted=True, return_inverse=True)
        if edge_type is not None:
            edge_type = unique_key % num_types
            unique_key = unique_key // num_types
        col = unique_key % max(num_nodes, 1)
        row = unique_key // max(num_nodes, 1)
        if edge_weight is not None:
            merged = edge_weight.new_zeros(unique_key.numel())
            edge_weight = merged.index_add(0, inverse, edge_weight)
        counts = torch.bincount(row, minlength=num_nodes)
        rowptr = torch.zeros(num_nodes + 1, dtype=torch.long, device=col.device)
        rowptr[1:] = torch.cumsum(counts, 0)
        graph = cls(rowptr, col, num_nodes, edge_weight, edge_type)
        graph._cache["row"] = row
        return graph

    @classmethod
    def from_data(cls, data: Any, **kwargs: Any) -> Graph:
        """Builds from a ``torch_geometric.data.Data`` (uses ``edge_index``, ``num_nodes`` and
        ``edge_weight`` or a 1-D ``edge_attr`` when present)."""
        weight = getattr(data, "edge_weight", None)
        attr = getattr(data, "edge_attr", None)
        if weight is None and attr is not None and attr.dim() == 1:
            weight = attr
        return cls.from_edge_index(data.edge_index, data.num_nodes, weight, **kwargs)

    # ---------------------------------------------------------------- basic facts
    @property
    def num_edges(self) -> int:
        return self.col.numel()

    @property
    def device(self) -> torch.device:
        return self.col.device

    def __repr__(self) -> str:
        extras = "".join(
            f", {name}" for name in ("edge_weight", "edge_type") if getattr(self, name) is not None
        )
        return (
            f"Graph(num_nodes={self.num_nodes}, num_edges={self.num_edges}{extras}, "
            f"device={self.device})"
        )

    def to(self, device: Any) -> Graph:
        """A copy on `device` (caches are rebuilt there on demand)."""
        device = torch.device(device)
        if device == self.device:
            return self
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return Graph(
            move(self.rowptr),
            move(self.col),
            self.num_nodes,
            move(self.edge_weight),
            move(self.edge_type),
        )

    def cached(self, key: Any, build: Callable[[], Any]) -> Any:
        """Returns the value cached under `key`, building it once. For derived, per-graph state
        (normalisations, layouts) that must not live inside layers."""
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    # ---------------------------------------------------------------- derived structure
    @property
    def row(self) -> Tensor:
        """``[num_edges]`` target node of each edge, in CSR order."""
        return self.cached(
            "row",
            lambda: torch.repeat_interleave(
                torch.arange(self.num_nodes, device=self.device), self.in_degree
            ),
        )

    @property
    def in_degree(self) -> Tensor:
        """``[num_nodes]`` int64 number of incoming edges (after coalescing)."""
        return self.cached("in_degree", lambda: self.rowptr.diff())

    @property
    def out_degree(self) -> Tensor:
        return self.cached("out_degree", lambda: self.csc.colptr.diff())

    @property
    def csc(self) -> CSC:
        """The transpose, cached: a :class:`CSC` ``(colptr, row, edge_id)``."""

        def build():
            edge_id = torch.argsort(self.col, stable=True)
            counts = torch.bincount(self.col, minlength=self.num_nodes)
            colptr = torch.zeros(self.num_nodes + 1, dtype=torch.long, device=self.device)
            colptr[1:] = torch.cumsum(counts, 0)
            return CSC(colptr, self.row[edge_id], edge_id)

        return self.cached("csc", build)

    def edge_index(self) -> Tensor:
        """``[2, num_edges]`` (source, target) in CSR order."""
        return torch.stack([self.col, self.row])

    def degree_scale(self, kind: str, dtype: torch.dtype) -> Tensor:
        """Per-node factors for the aggregation: ``"mean"`` -> 1/in_degree, ``"gcn"`` ->
        in_degree^-1/2 (PyG's gcn_norm on the unweighted graph); 0 where the degree is 0."""

        def build():
            deg = self.in_degree.to(dtype)
            scale = deg.reciprocal() if kind == "mean" else deg.rsqrt()
            return scale.masked_fill(deg == 0, 0.0)

        if kind not in ("mean", "gcn"):
            raise ValueError(f"unknown degree scale {kind!r}")
        return self.cached(("degree_scale", kind, dtype), build)

    def hub_rows(self, transposed: bool = False) -> Tensor:
        """Rows above the CUDA kernel's hub threshold (reduced by a whole block)."""
        from galfast._native import _C

        def build():
            ptr = self.csc.colptr if transposed else self.rowptr
            return (ptr.diff() > _C.HUB_DEGREE).nonzero().view(-1)

        return self.cached(("hub_rows", transposed), build)
