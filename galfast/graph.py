"""An immutable CSR graph (by destination) with lazily cached transpose, degrees and scales."""

from __future__ import annotations

import contextlib
import math
import operator
import os
from collections.abc import Sequence
from typing import Any, Callable, NamedTuple, Optional

import torch
from torch import Tensor

from galfast._args import check_device, check_flag
from galfast._dtypes import all_finite
from galfast._versions import check_unedited

__all__ = [
    "CSC",
    "Graph",
    "cached_derived",
    "check_csr",
    "check_op_graph",
    "coalesce",
    "lexsort",
    "plain_tensor",
]

_INDEX_DTYPES = (torch.int64, torch.int32)
_FIELDS = ("rowptr", "col", "edge_weight", "edge_type")
# Node counts beyond this could not even be offsets of int64 byte addresses.
_MAX_COUNT = 2**60


class CSC(NamedTuple):
    """A graph's transpose (edges grouped by source). Slot ``s`` of source ``j``, for ``s`` in
    ``colptr[j] : colptr[j + 1]``, is the edge ``j -> row[s]``, found at position
    ``edge_id[s]`` of the CSR order; within a source, slots keep CSR order."""

    colptr: Tensor  # [num_nodes + 1] int64 slot offsets per source node
    row: Tensor  # [num_edges] int64 destination of each slot's edge (as Graph.row in CSR)
    edge_id: Tensor  # [num_edges] int64 CSR position of each slot's edge


def _count(name: str, value: Any) -> int:
    """A non-negative int from an int, a numpy integer or an integer 0-d tensor; bools and
    floats (3.5, and 3.0 too) are refused."""
    if isinstance(value, Tensor):
        if value.numel() != 1 or value.dtype.is_floating_point or value.dtype == torch.bool:
            raise ValueError(
                f"{name} must be an int, got a {value.dtype} tensor of {value.numel()}"
            )
        value = int(value)
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise ValueError(f"{name} must be an int, got a bool")
    try:
        count = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an int, got {type(value).__name__} {value!r}") from None
    if not 0 <= count < _MAX_COUNT:
        raise ValueError(f"{name} must lie in [0, 2**60), got {count}")
    return count


def plain_tensor(t: Tensor) -> Tensor:
    """`t` itself, or the plain tensor inside an index wrapper such as PyG's ``EdgeIndex`` and
    ``Index``: those are wrapper subclasses without storage of their own (``data_ptr()`` is 0),
    so a kernel must be handed the tensor they wrap (their ``as_tensor()``)."""
    if type(t) is not Tensor:
        unwrap = getattr(t, "as_tensor", None)
        if callable(unwrap):
            return unwrap()
    return t


def _index_tensor(name: str, t: Any) -> Tensor:
    """`t` as a contiguous int64 tensor (the kernels read it through its data pointer): int64
    or int32 accepted (int32 converted), anything else refused."""
    if not isinstance(t, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in _INDEX_DTYPES:
        raise ValueError(f"{name} must hold integer indices (int64 or int32), got {t.dtype}")
    return plain_tensor(t).long().contiguous()


def plain_tensors() -> contextlib.AbstractContextManager:
    """A context that makes plain tensors under torch.inference_mode too, for what is cached:
    an inference tensor kept for later could not be saved for a training step's backward.
    Under torch.func transforms, outside them: a tensor made inside one is wrapped for that
    transform and dead once it returns. (Nothing changes while torch.compile traces, which
    keeps no cache.)"""
    if torch.compiler.is_compiling():
        return contextlib.nullcontext()
    if torch._C._are_functorch_transforms_active():
        return _outside_transforms()
    return torch.inference_mode(False)


@contextlib.contextmanager
def _outside_transforms():
    with torch._C._DisableFuncTorch(), torch.inference_mode(False):
        yield


def _cached_tensors(value: Any) -> tuple[Tensor, ...]:
    """The tensors of a cached value whose edits are watched: the value itself, or a tuple's
    (CSC) tensors."""
    if isinstance(value, Tensor):
        return (value,)
    if isinstance(value, tuple):
        return tuple(t for t in value if isinstance(t, Tensor))
    return ()


def cached_derived(cache: dict, key: Any, build: Callable[[], Any], owner: str) -> Any:
    """``cache[key]``, built once by ``build``; refused once a caller edited it in place (a
    Graph or Block hands its cached tensors out: ``in_degree``, ``degree_scale``, ``csc``)."""
    entry = cache.get(key)
    if entry is None:
        with plain_tensors():
            value = build()
        tensors = _cached_tensors(value)
        # Built while torch.compile traces: the trace's version counts are not the tensors'
        # own; they are recorded at the first eager read instead.
        versions = None if torch.compiler.is_compiling() else [t._version for t in tensors]
        cache[key] = value, tensors, versions
        return value
    value, tensors, versions = entry
    if not tensors or torch.compiler.is_compiling():
        return value
    # (every op call reads its cached inputs here: a list of versions is the cheap comparison)
    now = [t._version for t in tensors]
    if versions is None:
        cache[key] = value, tensors, now
    elif now != versions:
        raise ValueError(
            f"the {owner}'s derived {_cache_name(key)} was modified in place: a tensor a "
            f"{owner} returns (in_degree, degree_scale, csc, ...) is its cache, used by every op "
            f"on it; clone it before editing it, and build a new {owner}"
        )
    return value


def _cache_name(key: Any) -> str:
    """A cache key as a user reads it: "in_degree", "degree_scale('gcn', torch.float32)"."""
    if isinstance(key, tuple) and key and isinstance(key[0], str):
        return f"{key[0]}({', '.join(repr(k) for k in key[1:])})"
    return str(key)


def _tracked(*tensors: Optional[Tensor]) -> tuple[Optional[Tensor], ...]:
    """The tensors, those made under torch.inference_mode copied into plain ones: an inference
    tensor keeps no version counter (so an edit could not be seen) and could not be saved for
    the backward of a later training step. A graph built inside inference mode is rare; the
    copy is the price only there."""
    if torch.compiler.is_compiling() or not any(
        t is not None and t.is_inference() for t in tensors
    ):
        return tensors  # (a traced graph holds no inference tensor)
    with plain_tensors():
        return tuple(t.clone() if t is not None and t.is_inference() else t for t in tensors)


def _check_index(edge_index: Any, num_nodes: Any) -> tuple[Tensor, int]:
    edge_index = _index_tensor("edge_index", edge_index)
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"edge_index must have shape [2, num_edges], got {list(edge_index.shape)}")
    if edge_index.device.type == "meta":
        raise ValueError(
            "a Graph is built from the values of edge_index (sorted and merged), which a meta "
            "tensor has not: build it on the CPU or a GPU"
        )
    if edge_index.numel() and int(edge_index.min()) < 0:
        raise ValueError(f"edge_index holds a negative node id ({int(edge_index.min())})")
    inferred = int(edge_index.max()) + 1 if edge_index.numel() else 0
    if num_nodes is None:
        _check_fits_memory(inferred, edge_index.device, f"the largest node id is {inferred - 1}")
        return edge_index, inferred
    num_nodes = _count("num_nodes", num_nodes)
    if inferred > num_nodes:
        raise ValueError(
            f"edge_index refers to node {inferred - 1} but num_nodes is {num_nodes} "
            f"(ids must lie in [0, {num_nodes}))"
        )
    _check_fits_memory(num_nodes, edge_index.device, f"num_nodes is {num_nodes}")
    return edge_index, num_nodes


# Bytes per node that building a CSR holds at its peak: the int64 row counts, their cumulative
# sum and the row pointer, the self-loop mask, and the degrees the layers derive next.
_BYTES_PER_NODE = 40


def _device_memory(device: torch.device) -> Optional[int]:
    """The device's total memory in bytes, None where it cannot be told."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[1]
    if device.type == "cpu" and hasattr(os, "sysconf"):
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            return None
    return None


def _check_fits_memory(num_nodes: int, device: torch.device, why: str) -> None:
    """A node count whose per-node arrays alone exceed the device's memory is refused here:
    allocating them would get the process killed by the OOM killer (a stray id near 2^31 in
    an edge list is the usual cause), which no caller can catch."""
    memory = _device_memory(device)
    needed = num_nodes * _BYTES_PER_NODE
    if memory is not None and needed > memory:
        raise ValueError(
            f"a graph of {num_nodes} nodes ({why}) needs {needed / 2**30:.1f} GiB for its node "
            f"arrays alone, more than the {memory / 2**30:.1f} GiB of {device}: check the edge "
            "list for a stray id, or relabel the nodes to 0..n-1"
        )


def _check_edge_values(name: str, values: Optional[Tensor], num_edges: int, device) -> None:
    if values is None:
        return
    if not isinstance(values, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(values).__name__}")
    if values.dim() != 1 or values.numel() != num_edges:
        raise ValueError(f"{name} must have shape [{num_edges}], got {list(values.shape)}")
    if values.device != device:
        raise ValueError(f"{name} is on {values.device} but the edges are on {device}")


def _readable(t: Tensor) -> bool:
    """Whether `t`'s values can be checked: not while tracing, not on the meta device."""
    return not torch.compiler.is_compiling() and t.device.type != "meta"


def _check_edge_weight(edge_weight: Optional[Tensor], num_edges: int, device) -> None:
    _check_edge_values("edge_weight", edge_weight, num_edges, device)
    if edge_weight is None:
        return
    if not edge_weight.dtype.is_floating_point:
        raise ValueError(f"edge_weight must be floating point, got {edge_weight.dtype}")
    if _readable(edge_weight) and not all_finite(edge_weight):
        raise ValueError("edge_weight contains NaN or infinite values")


def _check_edge_type(edge_type: Optional[Tensor], num_edges: int, device) -> Optional[Tensor]:
    if edge_type is None:
        return None
    edge_type = _index_tensor("edge_type", edge_type)
    _check_edge_values("edge_type", edge_type, num_edges, device)
    if _readable(edge_type) and edge_type.numel() and int(edge_type.min()) < 0:
        raise ValueError("edge_type holds a negative relation id")
    return edge_type


def check_csr(
    rowptr: Tensor,
    col: Tensor,
    num_nodes: int,
    num_src_nodes: Optional[int] = None,
    *,
    ids: bool = True,
) -> None:
    """rowptr: [num_nodes + 1] offsets from 0, non-decreasing, ending at num_edges; col: ids in
    [0, num_src_nodes) (num_src_nodes defaults to num_nodes), read unless ``ids`` is False."""
    num_cols = num_nodes if num_src_nodes is None else num_src_nodes
    if rowptr.dim() != 1 or col.dim() != 1:
        raise ValueError(
            f"rowptr and col must be 1-D, got shapes {list(rowptr.shape)} and {list(col.shape)}"
        )
    if rowptr.device != col.device:
        raise ValueError(f"rowptr is on {rowptr.device} but col is on {col.device}")
    if rowptr.numel() != num_nodes + 1:
        raise ValueError(
            f"rowptr must have num_nodes + 1 = {num_nodes + 1} entries, got {rowptr.numel()}"
        )
    if not _readable(rowptr):
        return
    first, last = int(rowptr[0]), int(rowptr[-1])
    if first != 0 or last != col.numel():
        raise ValueError(
            f"rowptr must run from 0 to num_edges = {col.numel()}, got {first} to {last}"
        )
    if num_nodes and bool((rowptr[1:] < rowptr[:-1]).any()):
        raise ValueError("rowptr must be non-decreasing")
    if ids and col.numel():
        low, high = int(col.min()), int(col.max())
        if low < 0 or high >= num_cols:
            raise ValueError(
                f"col holds node ids in [{low}, {high}] but they must lie in [0, {num_cols})"
            )


def check_op_graph(graph: Any, op: str, *, one_node_set: bool = False) -> None:
    """What an op checks of its graph argument first: a :class:`Graph`, unmodified since it was
    built, on a device the kernels run on; with ``one_node_set``, not bipartite (the op's
    walks or messages take a source id for a destination id)."""
    if not isinstance(graph, Graph):
        raise ValueError(f"graph must be a galfast.Graph, got {type(graph).__name__}")
    graph.check_unmodified()
    if not graph._on_kernel_device:
        raise ValueError(
            f"{op}: galfast's kernels run on CPU and CUDA tensors, not on {graph.device.type}"
        )
    if one_node_set and graph.is_bipartite:
        raise ValueError(
            f"{op} needs one node set (every source is also a destination), but the graph is "
            f"bipartite: {graph.num_src_nodes} source and {graph.num_nodes} destination nodes"
        )


def check_node_ids(name: str, ids: Any, length: str) -> None:
    """Raises ValueError unless ``ids`` is a ``[length]`` int64 or int32 tensor (node ids: an
    op's seeds or starts). Their values are the caller's to check: on a GPU a read would
    synchronise."""
    if not isinstance(ids, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(ids).__name__}")
    if ids.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"{name} must hold int64 or int32 node ids, got {ids.dtype}")
    if ids.dim() != 1:
        raise ValueError(f"{name} must have shape [{length}], got {list(ids.shape)}")


def lexsort(keys: Sequence[Tensor], sizes: Sequence[int]) -> Tensor:
    """The stable order that sorts edges by ``keys[0]``, then ``keys[1]``, ... (key ``i`` in
    ``[0, sizes[i])``). One argsort of a packed int64 key where the product of the sizes fits,
    else one stable argsort per key, least significant first (the packed key would overflow)."""
    if math.prod([max(size, 1) for size in sizes]) < 2**63:  # a list traces, a generator not
        return torch.argsort(_packed(keys, sizes), stable=True)
    order = torch.arange(keys[0].numel(), device=keys[0].device)
    for key in reversed(keys):
        order = order[torch.argsort(key[order], stable=True)]
    return order


def coalesce(keys: Sequence[Tensor], sizes: Sequence[int]) -> tuple[list[Tensor], Tensor]:
    """The distinct key tuples in lexicographic order (one tensor per key) and, for each input
    edge, the position of its tuple among them (as :func:`lexsort` for the sizes)."""
    if math.prod(max(size, 1) for size in sizes) < 2**63:
        unique, inverse = torch.unique(_packed(keys, sizes), sorted=True, return_inverse=True)
        parts = []
        for size in reversed(sizes):
            parts.append(unique % max(size, 1))
            unique = unique // max(size, 1)
        return parts[::-1], inverse
    order = lexsort(keys, sizes)
    ordered = [key[order] for key in keys]
    starts = torch.zeros(order.numel(), dtype=torch.bool, device=order.device)
    starts[:1] = True
    for key in ordered:
        starts[1:] |= key[1:] != key[:-1]
    inverse = torch.empty_like(order)
    inverse[order] = torch.cumsum(starts, 0) - 1
    return [key[starts] for key in ordered], inverse


def _packed(keys: Sequence[Tensor], sizes: Sequence[int]) -> Tensor:
    packed = torch.zeros_like(keys[0])
    for key, size in zip(keys, sizes):
        packed = packed * max(size, 1) + key
    return packed


class Graph:
    """A directed graph stored as CSR by destination: row ``i`` lists the sources ``j`` of the
    edges ``j -> i`` (PyG convention: ``edge_index[0]`` = source, ``edge_index[1]`` = target).

    A bipartite graph (sources and destinations from two node sets, as PyG's ``(x_src, x_dst)``
    inputs) sets ``num_src_nodes``: then ``col`` holds ids in ``[0, num_src_nodes)`` and
    ``num_nodes`` counts the destinations (the rows).

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
        *,
        num_src_nodes: Optional[int] = None,
    ) -> None:
        self._build(rowptr, col, num_nodes, edge_weight, edge_type, num_src_nodes, ids=True)

    def _build(self, rowptr, col, num_nodes, edge_weight, edge_type, num_src_nodes, ids) -> None:
        """``__init__``'s checks and fields; ``ids``: read every source id (see check_csr)."""
        num_nodes = _count("num_nodes", num_nodes)
        num_src_nodes = (
            num_nodes if num_src_nodes is None else _count("num_src_nodes", num_src_nodes)
        )
        rowptr, col = _index_tensor("rowptr", rowptr), _index_tensor("col", col)
        check_csr(rowptr, col, num_nodes, num_src_nodes, ids=ids)
        if num_src_nodes != num_nodes:  # rowptr's own size bounds num_nodes, nothing this one
            _check_fits_memory(num_src_nodes, col.device, f"num_src_nodes is {num_src_nodes}")
        self._num_src_nodes = num_src_nodes
        _check_edge_weight(edge_weight, col.numel(), col.device)
        edge_type = _check_edge_type(edge_type, col.numel(), col.device)
        rowptr, col, edge_weight, edge_type = _tracked(rowptr, col, edge_weight, edge_type)
        self._rowptr, self._col, self._num_nodes = rowptr, col, num_nodes
        self._edge_weight, self._edge_type = edge_weight, edge_type
        # A graph built while torch.compile traces (a layer's derived graph) records its
        # tensors' versions at its first eager check: the trace's counts are not theirs.
        compiling = torch.compiler.is_compiling()
        self._versions = None if compiling else self._tensor_versions()
        self._cache: dict[Any, Any] = {}
        # A meta graph may be built (to trace shapes), but no kernel runs on it.
        self._on_kernel_device = col.device.type in ("cpu", "cuda")

    # Read-only: derived structure is cached on the graph, so its tensors must not change.
    rowptr = property(lambda self: self._rowptr, doc="[num_nodes + 1] int64 offsets into col.")
    col = property(lambda self: self._col, doc="[num_edges] int64 source node of each edge.")
    num_nodes = property(lambda self: self._num_nodes, doc="Number of (destination) nodes.")
    num_src_nodes = property(
        lambda self: self._num_src_nodes, doc="Number of source nodes (num_nodes unless bipartite)."
    )

    @property
    def is_bipartite(self) -> bool:
        """Whether sources and destinations are two node sets (see ``num_src_nodes``)."""
        return self._num_src_nodes != self._num_nodes

    edge_weight = property(lambda self: self._edge_weight, doc="Optional [num_edges] weights.")
    edge_type = property(lambda self: self._edge_type, doc="Optional [num_edges] relation ids.")

    def _tensor_versions(self) -> tuple:
        # Spelled out, not a loop over the fields: every op's call reads these (0.4 us faster
        # than a comprehension, a few percent of a small call).
        weight, types = self._edge_weight, self._edge_type
        return (
            self._rowptr._version,
            self._col._version,
            None if weight is None else weight._version,
            None if types is None else types._version,
        )

    def check_unmodified(self) -> None:
        """Raises ValueError when one of the graph's tensors was modified in place since the
        graph was built (ops call this first): the kernels and the cached transpose would
        disagree about the graph. Edits that bypass the version counter (``.data``,
        ``.numpy()``) are not seen here; the CPU kernels still check every index they use."""
        if torch.compiler.is_compiling():
            return
        versions = self._tensor_versions()
        if self._versions is None:
            self._versions = versions
        elif versions != self._versions:
            check_unedited(
                "Graph", _FIELDS, versions, self._versions, "Graphs are immutable: build a new one"
            )

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

        Duplicate edges (same source, target and type) are coalesced into one, as
        ``torch_geometric.utils.coalesce`` does: their weights summed, or, without weights, the
        edge counted once (pass ``edge_weight=torch.ones(E)`` to keep the multiplicity; a layer
        given the ``edge_index`` itself sends a message per column, as PyG's).
        ``symmetrize`` adds every reverse edge; ``add_self_loops`` gives each node that lacks one
        a self loop of weight 1 (PyG's ``add_remaining_self_loops``). Building is differentiable
        in ``edge_weight``.
        """
        edge_index, num_nodes = _check_index(edge_index, num_nodes)
        symmetrize = check_flag("symmetrize", symmetrize)  # "no" or None read by truth before
        add_self_loops = check_flag("add_self_loops", add_self_loops)
        num_edges = edge_index.size(1)
        _check_edge_weight(edge_weight, num_edges, edge_index.device)
        edge_type = _check_edge_type(edge_type, num_edges, edge_index.device)

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

        # Sort by (target, source, type) and merge equal keys; types are compacted first so
        # that sparse large relation ids do not inflate the key.
        keys, sizes = [dst, src], [num_nodes, num_nodes]
        if edge_type is not None:
            type_ids, compact = torch.unique(edge_type, return_inverse=True)
            keys.append(compact)
            sizes.append(type_ids.numel())
        distinct, inverse = coalesce(keys, sizes)
        row, col = distinct[0], distinct[1]
        if edge_type is not None:
            edge_type = type_ids[distinct[2]]
        if edge_weight is not None:
            merged = edge_weight.new_zeros(col.numel())
            edge_weight = merged.index_add(0, inverse, edge_weight)
        counts = torch.bincount(row, minlength=num_nodes)
        rowptr = torch.zeros(num_nodes + 1, dtype=torch.long, device=col.device)
        rowptr[1:] = torch.cumsum(counts, 0)
        graph = cls(rowptr, col, num_nodes, edge_weight, edge_type)
        graph.cached("row", lambda: _tracked(row)[0])
        return graph

    @classmethod
    def from_data(cls, data: Any, **kwargs: Any) -> Graph:
        """Builds from a ``torch_geometric.data.Data`` or a ``Batch`` of them (a batch is one
        graph whose components are its examples; its ``batch`` vector is not part of the Graph
        and is passed to the layers that take one). Uses ``edge_index``, ``num_nodes`` and
        ``edge_weight``, or a 1-D ``edge_attr`` as the weight; ``kwargs`` go to
        :meth:`from_edge_index`, which coalesces repeated edges (so a layer's numbers on this
        Graph differ from PyG's on ``data.edge_index`` where it repeats an edge; see
        docs/pyg_compat.md). Heterogeneous data (``HeteroData``) is refused: build one Graph
        per edge type."""
        if hasattr(data, "edge_types") and hasattr(data, "node_types"):
            raise ValueError(
                "Graph.from_data takes a homogeneous Data or Batch; for HeteroData build one "
                "Graph per edge type with Graph.from_edge_index(data[edge_type].edge_index, ...)"
            )
        edge_index = getattr(data, "edge_index", None)
        if edge_index is None:
            raise ValueError(
                f"Graph.from_data needs data.edge_index; {type(data).__name__} has none (for an "
                "adj_t, pass it to the layers directly)"
            )
        weight = getattr(data, "edge_weight", None)
        attr = getattr(data, "edge_attr", None)
        if weight is None and isinstance(attr, Tensor) and attr.dim() == 1:
            weight = attr
        return cls.from_edge_index(edge_index, data.num_nodes, weight, **kwargs)

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
        src = f", num_src_nodes={self.num_src_nodes}" if self.is_bipartite else ""
        return (
            f"Graph(num_nodes={self.num_nodes}{src}, num_edges={self.num_edges}{extras}, "
            f"device={self.device})"
        )

    def to(self, device: Any) -> Graph:
        """A copy on `device` (caches are rebuilt there on demand)."""
        device = check_device(device)
        if device == self.device:
            return self
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return Graph(
            move(self.rowptr),
            move(self.col),
            self.num_nodes,
            move(self.edge_weight),
            move(self.edge_type),
            num_src_nodes=self.num_src_nodes,
        )

    # Copies and pickles (copy.deepcopy, torch.save, a DataLoader worker) carry the graph's
    # tensors, not its cache: derived structure is rebuilt on first use, and the copy starts
    # from the version counters of its own tensors, which a copy resets.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_versions"]
        state["_cache"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Checked as a new graph is, but for reading every source id (O(E): a DataLoader
        # worker's batch of blocks carries the whole graph; the kernels check the ids they
        # read): a pickle may come from elsewhere or have been edited, and a num_nodes past
        # rowptr's end would send the kernels beyond it.
        if not isinstance(state, dict):
            raise ValueError(f"a Graph's pickled state is a dict, got {type(state).__name__}")
        self._build(
            state.get("_rowptr"),
            state.get("_col"),
            state.get("_num_nodes"),
            state.get("_edge_weight"),
            state.get("_edge_type"),
            state.get("_num_src_nodes"),
            ids=False,
        )

    def cached(self, key: Any, build: Callable[[], Any]) -> Any:
        """Returns the value cached under `key`, building it once. For derived, per-graph state
        (normalisations, layouts) that must not live inside layers. A cached tensor (or a tuple's
        tensors) that was modified in place since it was built, by a caller who took
        ``graph.in_degree`` or ``graph.degree_scale(...)`` for its own use, is refused."""
        return cached_derived(self._cache, key, build, "Graph")

    # ---------------------------------------------------------------- derived structure
    def _checked(self) -> Graph:
        """Self, after checking the CSR again: derived structure is built from the tensors as
        they are now, which an edit through ``.data`` may have broken."""
        self.check_unmodified()
        check_csr(self.rowptr, self.col, self.num_nodes, self.num_src_nodes)
        return self

    @property
    def row(self) -> Tensor:
        """``[num_edges]`` target node of each edge, in CSR order."""
        return self.cached(
            "row",
            lambda: torch.repeat_interleave(
                torch.arange(self.num_nodes, device=self.device),
                self._checked().in_degree,
                output_size=self.num_edges,  # known: no data-dependent shape under torch.compile
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
            self._checked()
            edge_id = torch.argsort(self.col, stable=True)
            # A fixed-size scatter rather than bincount, whose shape torch.compile cannot know.
            counts = torch.zeros(self.num_src_nodes, dtype=torch.long, device=self.device)
            counts.scatter_add_(0, self.col, torch.ones_like(self.col))
            colptr = torch.zeros(self.num_src_nodes + 1, dtype=torch.long, device=self.device)
            colptr[1:] = torch.cumsum(counts, 0)
            return CSC(colptr, self.row[edge_id], edge_id)

        return self.cached("csc", build)

    @property
    def csc_slot(self) -> Tensor:
        """``[num_edges]`` int64 slot in :attr:`csc` of each CSR edge (the inverse of
        ``csc.edge_id``), cached: a kernel that writes per-edge results in CSC order reads them
        back by CSR edge through it."""

        def build():
            edge_id = self.csc.edge_id
            slots = torch.arange(edge_id.numel(), device=self.device)
            return torch.empty_like(edge_id).scatter_(0, edge_id, slots)

        return self.cached("csc_slot", build)

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
