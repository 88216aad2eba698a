"""Task batches for the trainer: nodes, links and ratings, split into (optionally shuffled)
mini-batches of indices. Whole graphs (molecules) are in :mod:`galfast.train.graph_batches`,
re-exported here."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Optional, Union

import torch
from torch import Tensor, nn

from galfast._args import check_flag, check_int
from galfast._dtypes import all_finite
from galfast.graph import _count
from galfast.models.rating_decoder import BilinearRatingDecoder
from galfast.train.batch_indices import check_batch_size, index_batches
from galfast.train.graph_batches import GraphBatch, GraphBatches

__all__ = [
    "GraphBatch",
    "GraphBatches",
    "LinkBatch",
    "LinkBatches",
    "NodeBatch",
    "NodeBatches",
    "RatingBatch",
    "RatingBatches",
    "check_batch_size",
    "index_batches",
]


@dataclass(frozen=True, eq=False)
class NodeBatch:
    """``nodes`` ``[B]`` int64 ids and their task targets ``y`` ``[B, ...]``."""

    nodes: Tensor
    y: Tensor

    def to(self, device) -> NodeBatch:
        return NodeBatch(self.nodes.to(device), self.y.to(device))


def _as_tensor(name: str, value: object) -> Tensor:
    """``value`` as a tensor: lists and arrays are converted (as torch.as_tensor does)."""
    if isinstance(value, Tensor):
        return value
    try:
        return torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"{name} must be a tensor (or a list or array of numbers): {err}") from err


class NodeBatches:
    """Re-iterable mini-batches of labelled nodes.

    Args:
        nodes: ``[K]`` int64 ids of the training nodes (a tensor, a list or an array).
        y: ``[K, ...]`` their targets (class ids, values; a tensor, a list or an array).
        batch_size: nodes per batch; None = all in one batch (full-batch training).
        shuffle: reshuffle every epoch.

    Example:
        >>> batches = NodeBatches(torch.arange(4), torch.zeros(4), batch_size=2, shuffle=False)
        >>> [b.nodes.tolist() for b in batches]
        [[0, 1], [2, 3]]
    """

    def __init__(
        self,
        nodes: Union[Tensor, Sequence[int]],
        y: Union[Tensor, Sequence],
        batch_size: Optional[int] = None,
        shuffle: bool = True,
    ) -> None:
        nodes, y = _as_tensor("nodes", nodes), _as_tensor("y", y)
        if nodes.dim() != 1 or nodes.dtype not in (torch.int64, torch.int32):
            raise ValueError(
                f"nodes must be a 1-D int64 tensor, got shape {list(nodes.shape)} "
                f"dtype {nodes.dtype}"
            )
        rows = y.size(0) if y.dim() else 0  # a scalar has no rows
        if rows != nodes.numel():
            raise ValueError(f"y has {rows} rows for {nodes.numel()} nodes")
        _check_not_negative("nodes", nodes)
        _check_consistent_labels(nodes, y)
        batch_size, shuffle = check_batch_size(batch_size), check_flag("shuffle", shuffle)
        self.nodes, self.y = nodes.long(), y
        self.batch_size, self.shuffle = batch_size, shuffle

    def check_nodes(self, num_nodes: int) -> None:
        """Every node id must lie in the graph being trained on (``fit`` checks this, and so
        catches ids edited in place since the batches were built)."""
        _check_ids_in_graph("nodes", self.nodes, num_nodes)

    def __len__(self) -> int:
        size = self.batch_size or max(self.nodes.numel(), 1)
        return -(-self.nodes.numel() // size)

    def __iter__(self) -> Iterator[NodeBatch]:
        batches = index_batches(
            self.nodes.numel(), self.batch_size, self.shuffle, device=self.nodes.device
        )
        for idx in batches:
            yield NodeBatch(self.nodes[idx], self.y[idx])


def _check_consistent_labels(nodes: Tensor, y: Tensor) -> None:
    """A node listed twice is weighed twice (oversampling, allowed); with two different
    targets it is a mistake (a relabelled copy)."""
    order = torch.sort(nodes, stable=True).indices
    repeated = nodes[order][1:] == nodes[order][:-1]
    if not bool(repeated.any()):
        return
    first, second = order[:-1][repeated], order[1:][repeated]
    differs = (y[first] != y[second]).reshape(first.numel(), -1).any(1)
    if bool(differs.any()):
        node = int(nodes[first[differs][0]])
        raise ValueError(f"nodes lists node {node} twice with different targets in y")


def _check_not_negative(name: str, ids: Tensor) -> None:
    if ids.numel() and int(ids.min()) < 0:  # would index from the end: the wrong nodes
        raise ValueError(f"{name} holds a negative node id ({int(ids.min())})")


def _check_ids_in_graph(name: str, ids: Tensor, num_nodes: int) -> None:
    _check_not_negative(name, ids)
    if ids.numel() and int(ids.max()) >= num_nodes:
        raise ValueError(
            f"{name} holds node id {int(ids.max())} but the graph has {num_nodes} nodes"
        )


def _check_edge_index(edge_index: Tensor) -> Tensor:
    if (
        not isinstance(edge_index, Tensor)
        or edge_index.dim() != 2
        or edge_index.size(0) != 2
        or edge_index.dtype not in (torch.int64, torch.int32)
    ):
        raise ValueError("edge_index must be an int64 tensor of shape [2, num_edges]")
    _check_not_negative("edge_index", edge_index)
    return edge_index.long()


@dataclass(frozen=True, eq=False)
class LinkBatch:
    """Candidate edges ``src -> dst`` ``[B]`` with ``label`` 1 (observed) or 0 (negative)."""

    src: Tensor
    dst: Tensor
    label: Tensor

    def to(self, device) -> LinkBatch:
        return LinkBatch(self.src.to(device), self.dst.to(device), self.label.to(device))


class LinkBatches:
    """Re-iterable link-prediction batches: each batch holds ``batch_size`` observed edges and,
    for each, ``negatives`` corrupted edges ``(src, random node)`` drawn uniformly afresh every
    epoch (negatives may occasionally hit an observed edge, the usual cheap approximation).

    Args:
        edge_index: ``[2, E]`` observed (training) edges.
        num_nodes: nodes to draw corrupted destinations from.
        batch_size: observed edges per batch; None = all (full-graph training).
        negatives: negative edges per observed edge (>= 0).
        shuffle: reshuffle the observed edges every epoch.
    """

    def __init__(
        self,
        edge_index: Tensor,
        num_nodes: int,
        batch_size: Optional[int] = None,
        negatives: int = 1,
        shuffle: bool = True,
    ) -> None:
        self.edge_index = _check_edge_index(edge_index)
        num_nodes = _count("num_nodes", num_nodes)
        if num_nodes < 1 or (self.edge_index.numel() and int(self.edge_index.max()) >= num_nodes):
            raise ValueError(f"num_nodes={num_nodes} does not cover the node ids in edge_index")
        negatives = check_int("negatives", negatives, 0)
        batch_size, shuffle = check_batch_size(batch_size), check_flag("shuffle", shuffle)
        self.num_nodes, self.batch_size = num_nodes, batch_size
        self.negatives, self.shuffle = negatives, shuffle

    def check_nodes(self, num_nodes: int) -> None:
        """The pairs and the negatives' range must lie in the graph being trained on (``fit``
        checks this, and so catches ids edited in place since the batches were built)."""
        _check_ids_in_graph("edge_index", self.edge_index, num_nodes)
        if self.num_nodes > num_nodes:
            raise ValueError(
                f"num_nodes={self.num_nodes} draws negatives past the graph's {num_nodes} nodes"
            )

    def __len__(self) -> int:
        size = self.batch_size or max(self.edge_index.size(1), 1)
        return -(-self.edge_index.size(1) // size)

    def __iter__(self) -> Iterator[LinkBatch]:
        n, device = self.edge_index.size(1), self.edge_index.device
        for idx in index_batches(n, self.batch_size, self.shuffle, device=device):
            src, dst = self.edge_index[:, idx]
            neg_src = src.repeat(self.negatives)
            neg_dst = torch.randint(self.num_nodes, (neg_src.numel(),)).to(src.device)
            label = torch.cat([torch.ones(src.numel()), torch.zeros(neg_src.numel())])
            yield LinkBatch(
                torch.cat([src, neg_src]), torch.cat([dst, neg_dst]), label.to(src.device)
            )


@dataclass(frozen=True, eq=False)
class RatingBatch:
    """Rated pairs ``src -> dst`` ``[B]``: ``level`` int64 index into the rating levels (the
    class for a GC-MC decoder) and ``rating`` the float rating value."""

    src: Tensor
    dst: Tensor
    level: Tensor
    rating: Tensor

    def to(self, device) -> RatingBatch:
        return RatingBatch(
            self.src.to(device), self.dst.to(device), self.level.to(device), self.rating.to(device)
        )


class RatingBatches:
    """Re-iterable rating-prediction batches (MovieLens: user -> movie edges rated 1..5).

    Args:
        edge_index: ``[2, E]`` rated pairs (user, item).
        ratings: ``[E]`` rating values, each one of ``levels`` (a tensor, a list or an array).
        levels: the possible ratings in increasing order (default: the sorted distinct values).
        batch_size: ratings per batch (8,192 in the paper's MovieLens runs); None = all.
        shuffle: reshuffle every epoch.
    """

    def __init__(
        self,
        edge_index: Tensor,
        ratings: Union[Tensor, Sequence[float]],
        levels: Optional[Sequence[float]] = None,
        batch_size: Optional[int] = 8192,
        shuffle: bool = True,
    ) -> None:
        self.edge_index = _check_edge_index(edge_index)
        ratings = _as_tensor("ratings", ratings)
        if ratings.dim() != 1 or ratings.numel() != self.edge_index.size(1):
            raise ValueError(
                f"ratings must have shape [{self.edge_index.size(1)}], got {list(ratings.shape)}"
            )
        batch_size, shuffle = check_batch_size(batch_size), check_flag("shuffle", shuffle)
        # One contiguous copy up front: every batch gathers from it (a transposed view, as
        # ``ratings[:, :2].t()``, makes each gather strided and several times slower).
        self.edge_index = self.edge_index.contiguous()
        values = ratings.to(torch.get_default_dtype())
        if not all_finite(values):
            raise ValueError("ratings contain NaN or infinite values")
        self.levels = (
            torch.unique(values)
            if levels is None
            else torch.as_tensor(levels, dtype=values.dtype, device=values.device)
        )
        if (
            self.levels.dim() != 1
            or self.levels.numel() == 0
            or not bool((self.levels.diff() > 0).all())  # False for a NaN level too
        ):
            raise ValueError(
                f"levels must be a non-empty, strictly increasing sequence of numbers, got "
                f"{self.levels.tolist()}"
            )
        level = torch.searchsorted(self.levels, values).clamp_max(self.levels.numel() - 1)
        if not bool((self.levels[level] == values).all()):
            raise ValueError(f"a rating is not one of the levels {self.levels.tolist()}")
        self.level, self.rating = level, values.contiguous()
        self.batch_size, self.shuffle = batch_size, shuffle
        self._packed = _pack_ratings(self.edge_index, level, self.levels, self.rating)

    def check_nodes(self, num_nodes: int) -> None:
        """The rated pairs must lie in the graph being trained on (``fit`` checks this)."""
        _check_ids_in_graph("edge_index", self.edge_index, num_nodes)

    def check_head(self, task_head: nn.Module) -> None:
        """Every rating decoder of ``task_head`` must score these levels (``fit`` checks
        this): with the default levels, the distinct ratings given, a star missing from them
        shifted every level above it, and a 5-level decoder read a 3 as a 2."""
        mine = self.levels.cpu()
        for module in task_head.modules():
            if not isinstance(module, BilinearRatingDecoder):
                continue
            theirs = module.levels.cpu().to(mine.dtype)
            if theirs.shape != mine.shape or not torch.equal(theirs, mine):
                raise ValueError(
                    f"the task head's rating decoder scores the levels {theirs.tolist()} but "
                    f"the batches' ratings take the levels {mine.tolist()}; pass "
                    f"levels={theirs.tolist()} to RatingBatches"
                )

    def __len__(self) -> int:
        size = self.batch_size or max(self.edge_index.size(1), 1)
        return -(-self.edge_index.size(1) // size)

    def __iter__(self) -> Iterator[RatingBatch]:
        # The packed keys stand for the fields only while these are the tensors they were
        # packed from, unedited; after an assignment or an in-place edit the fields are read.
        fields = (self.edge_index, self.level, self.levels, self.rating)
        packed = self._packed if self._packed and self._packed.packed_from(fields) else None
        n, device = self.edge_index.size(1), self.edge_index.device
        for idx in index_batches(n, self.batch_size, self.shuffle, device=device):
            if packed is not None:
                yield packed.batch(idx, self.levels)
                continue
            # index_select: the same elements as indexing, without advanced indexing's
            # per-call setup (MovieLens: 3x faster on 8,192 of 900k ratings).
            src, dst = self.edge_index.index_select(1, idx)
            level, rating = self.level.index_select(0, idx), self.rating.index_select(0, idx)
            yield RatingBatch(src, dst, level, rating)


@dataclass(frozen=True)
class _PackedRatings:
    """Each rating's (src, dst, level) in one int64, ``src << (dst_bits + level_bits) | dst
    << level_bits | level``: a batch is one gather from one array. Four gathers of 8,192
    random rows from four arrays of 900k (MovieLens) miss the cache four times per rating,
    and a training step leaves nothing of them in cache. Shifts and masks unpack it (int64
    division is several times slower). The rating is the level's value (checked bitwise)."""

    keys: Tensor
    dst_bits: int
    level_bits: int
    sources: tuple  # (edge_index, level, levels, rating) as packed
    versions: tuple  # their version counters then

    def packed_from(self, fields: tuple) -> bool:
        return all(a is b for a, b in zip(fields, self.sources)) and self.versions == tuple(
            t._version for t in fields
        )

    def batch(self, idx: Tensor, levels: Tensor) -> RatingBatch:
        keys = self.keys.index_select(0, idx)
        level = keys & ((1 << self.level_bits) - 1)
        dst = (keys >> self.level_bits) & ((1 << self.dst_bits) - 1)
        src = keys >> (self.dst_bits + self.level_bits)
        return RatingBatch(src, dst, level, levels.index_select(0, level))


def _pack_ratings(
    edge_index: Tensor, level: Tensor, levels: Tensor, rating: Tensor
) -> Optional[_PackedRatings]:
    """The packed ratings, or None when the key would not fit an int64 or a rating is not
    bitwise its level's value (a -0.0 rating at level 0.0)."""
    if edge_index.numel() == 0 or int(edge_index.min()) < 0:
        return None
    src_bits, dst_bits = (int(edge_index[i].max()).bit_length() for i in (0, 1))
    level_bits = (levels.numel() - 1).bit_length()
    if src_bits + dst_bits + level_bits > 62:
        return None
    by_level = levels.index_select(0, level)
    if not torch.equal(by_level.view(torch.uint8), rating.view(torch.uint8)):
        return None
    keys = (edge_index[0] << (dst_bits + level_bits)) | (edge_index[1] << level_bits) | level
    sources = (edge_index, level, levels, rating)
    return _PackedRatings(keys, dst_bits, level_bits, sources, tuple(t._version for t in sources))
