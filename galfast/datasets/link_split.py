"""Seeded link-prediction split of an undirected graph (like PyG's ``RandomLinkSplit``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import torch
from torch import Tensor

from galfast._args import check_device, check_int
from galfast._dtypes import holds_integers
from galfast.datasets._arrays import sorted_unique
from galfast.datasets._generator_args import check_held_out
from galfast.graph import Graph

__all__ = ["LinkSplit", "random_link_split", "sample_negative_edges", "undirected_pairs"]


@dataclass(frozen=True, eq=False)
class LinkSplit:
    """Positive and negative node pairs for link prediction, each undirected pair once.

    Every ``*_pos`` / ``*_neg`` tensor is ``[2, k]`` int64 with ``row 0 < row 1``. The sets are
    disjoint: no pair is in two positive sets, negatives are non-edges of the whole graph, and
    validation and test negatives do not overlap.

    Attributes:
        graph: the message-passing graph: training edges only, both directions, so the encoder
            never sees a held-out edge.
        train_pos: ``[2, E_train]`` training edges (negatives for training are drawn per step
            with :func:`sample_negative_edges`).
        val_pos, val_neg: ``[2, E_val]`` validation edges and as many non-edges.
        test_pos, test_neg: ``[2, E_test]`` test edges and as many non-edges.
    """

    graph: Graph
    train_pos: Tensor
    val_pos: Tensor
    val_neg: Tensor
    test_pos: Tensor
    test_neg: Tensor

    def __post_init__(self) -> None:
        # A hand-built split with [k, 2] pairs, float ids or ids past the graph was read as
        # other pairs by the link losses and metrics, without a word.
        if not isinstance(self.graph, Graph):
            raise ValueError(f"graph must be a galfast.Graph, got {type(self.graph).__name__}")
        for f in fields(self)[1:]:
            pairs = getattr(self, f.name)
            if not isinstance(pairs, Tensor):
                raise ValueError(f"{f.name} must be a [2, k] tensor, got {type(pairs).__name__}")
            if not holds_integers(pairs) or pairs.dim() != 2 or pairs.size(0) != 2:
                raise ValueError(
                    f"{f.name} must be a [2, k] tensor of node ids (a pair a column), got "
                    f"{pairs.dtype} of shape {list(pairs.shape)}"
                )
            if pairs.device != self.graph.device:
                raise ValueError(
                    f"{f.name} is on {pairs.device} but the graph is on {self.graph.device}"
                )
            # Stored as int64: the link losses and metrics index with them, and a uint8
            # index selects as a mask.
            pairs = pairs.long()
            object.__setattr__(self, f.name, pairs)
            if pairs.device.type == "meta" or not pairs.numel():
                continue  # a meta split (shapes only) has no ids to read
            if int(pairs.min()) < 0 or int(pairs.max()) >= self.graph.num_nodes:
                raise ValueError(
                    f"{f.name} holds a node id outside [0, {self.graph.num_nodes}) of the graph"
                )

    def to(self, device: Any) -> LinkSplit:
        """A copy with every tensor (and the graph) on `device`."""
        device = check_device(device)
        return replace(self, **{f.name: getattr(self, f.name).to(device) for f in fields(self)})


def undirected_pairs(edge_index: np.ndarray) -> np.ndarray:
    """``[2, E]`` directed edges -> ``[2, P]`` int64 unique pairs ``u < v`` sorted by ``(u, v)``
    (duplicates and both directions merged, self loops dropped)."""
    edge_index = np.asarray(edge_index, dtype=np.int64).reshape(2, -1)
    u, v = np.minimum(edge_index[0], edge_index[1]), np.maximum(edge_index[0], edge_index[1])
    u, v = u[u != v], v[u != v]
    if u.size == 0:
        return np.zeros((2, 0), dtype=np.int64)
    width = int(v.max()) + 1
    keys = sorted_unique(u * width + v)
    return np.stack([keys // width, keys % width])


# Pairs are packed into int64 keys u * num_nodes + v.
_MAX_NODES = math.isqrt(2**63 - 1) + 1


def _check_num_nodes(num_nodes: Any) -> int:
    # 5.5 or True were taken (True as 1 node), a negative count drew from an empty range.
    return check_int("num_nodes", num_nodes, 0, _MAX_NODES)


def _pair_keys(pairs: np.ndarray, num_nodes: int) -> np.ndarray:
    return pairs[0].astype(np.int64) * num_nodes + pairs[1]


def sample_negative_edges(
    num_nodes: int,
    forbidden: np.ndarray,
    count: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Draws `count` distinct node pairs ``u < v`` uniformly among pairs not in `forbidden`.

    Args:
        num_nodes: nodes are ``0 .. num_nodes - 1``.
        forbidden: ``[2, F]`` pairs to avoid (any order within a pair; self loops are never
            drawn anyway).
        count: number of pairs wanted.
        rng: the numpy generator that makes the draw reproducible.

    Returns:
        ``[2, count]`` int64 pairs in random order.

    Raises:
        ValueError: fewer than `count` allowed pairs exist.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> sample_negative_edges(4, np.array([[0], [1]]), 2, rng).shape
        (2, 2)
    """
    num_nodes = _check_num_nodes(num_nodes)
    count = check_int("count", count, 0)  # NumPy's and 0-d tensors' ints too
    if not isinstance(rng, np.random.Generator):  # an int seed failed on rng.integers
        raise ValueError(
            f"rng must be a numpy.random.Generator (np.random.default_rng(seed)), got "
            f"{type(rng).__name__}"
        )
    forbidden = np.asarray(forbidden)
    # None failed in a comparison; floats were truncated and a flat array reshaped to pairs.
    if forbidden.size and (
        forbidden.dtype.kind not in "iu" or forbidden.ndim != 2 or forbidden.shape[0] != 2
    ):
        raise ValueError(
            f"forbidden must be a [2, F] array of integer node ids, got {forbidden.dtype} of "
            f"shape {list(forbidden.shape)}"
        )
    # A pair out of range would pack into the key of another pair and forbid that one.
    if forbidden.size and (forbidden.min() < 0 or forbidden.max() >= num_nodes):
        raise ValueError(f"forbidden holds a node id outside [0, {num_nodes})")
    forbidden_keys = _pair_keys(undirected_pairs(forbidden), num_nodes)
    available = num_nodes * (num_nodes - 1) // 2 - forbidden_keys.size
    if count > available:
        raise ValueError(
            f"cannot draw {count} negative pairs: only {available} node pairs of a "
            f"{num_nodes}-node graph are not edges"
        )
    chosen = np.empty(0, dtype=np.int64)
    while chosen.size < count:
        # Oversample, then reject self loops, forbidden pairs and repeats (keeping draw order).
        need = count - chosen.size
        u = rng.integers(0, num_nodes, size=2 * need + 16)
        v = rng.integers(0, num_nodes, size=2 * need + 16)
        candidates = np.stack([np.minimum(u, v), np.maximum(u, v)])[:, u != v]
        keys = _pair_keys(candidates, num_nodes)
        keys = keys[~np.isin(keys, forbidden_keys) & ~np.isin(keys, chosen)]
        _, first = np.unique(keys, return_index=True)
        chosen = np.concatenate([chosen, keys[np.sort(first)][:need]])
    return np.stack([chosen // num_nodes, chosen % num_nodes])


def _check_pairs(pairs: np.ndarray, num_nodes: int) -> None:
    """Raises ValueError unless `pairs` is a ``[2, P]`` integer array of unique pairs
    ``0 <= u < v < num_nodes``: a pair given twice could land in train and test at once."""
    if not isinstance(pairs, np.ndarray) or pairs.ndim != 2 or pairs.shape[0] != 2:
        raise ValueError(f"pairs must be a [2, P] array, got {getattr(pairs, 'shape', pairs)}")
    if pairs.size == 0:
        return
    if pairs.dtype.kind not in "iu":
        raise ValueError(f"pairs must hold integer node ids, got dtype {pairs.dtype}")
    if pairs.min() < 0 or pairs.max() >= num_nodes:
        raise ValueError(f"pairs hold a node id outside [0, {num_nodes})")
    if not (pairs[0] < pairs[1]).all():
        raise ValueError("pairs must have u < v in every column (see undirected_pairs)")
    if sorted_unique(_pair_keys(pairs, num_nodes)).size != pairs.shape[1]:
        raise ValueError("pairs hold a pair twice (see undirected_pairs)")


def random_link_split(
    pairs: np.ndarray,
    num_nodes: int,
    *,
    val_fraction: float = 0.05,
    test_fraction: float = 0.1,
    seed: int = 0,
) -> LinkSplit:
    """Splits undirected edges into train / validation / test and draws negatives.

    Like PyG's ``RandomLinkSplit(is_undirected=True)`` with its defaults: a random permutation
    of the unique pairs gives ``int(val_fraction * P)`` validation and ``int(test_fraction * P)``
    test edges, the rest train; validation and test each get as many negatives (pairs that are
    not edges of the whole graph). Unlike PyG, the test-time message-passing graph also uses
    training edges only (the GAL setup), and self loops are never positives.

    Args:
        pairs: ``[2, P]`` unique undirected pairs ``u < v`` (see :func:`undirected_pairs`).
        num_nodes: number of nodes of the graph.
        val_fraction, test_fraction: shares of the pairs held out.
        seed: makes the split and the negatives reproducible.
    """
    val_fraction, test_fraction = check_held_out(val_fraction, test_fraction)
    num_nodes = _check_num_nodes(num_nodes)
    _check_pairs(pairs, num_nodes)
    # SeedSequence took True as 1, failed on 2.5 (TypeError) and on a 0-d tensor.
    rng = np.random.default_rng(np.random.SeedSequence([check_int("seed", seed, 0), 0x11A]))
    num_pairs = pairs.shape[1]
    num_val, num_test = int(val_fraction * num_pairs), int(test_fraction * num_pairs)
    perm = rng.permutation(num_pairs)
    num_train = num_pairs - num_val - num_test
    train = pairs[:, np.sort(perm[:num_train])]
    val = pairs[:, np.sort(perm[num_train : num_train + num_val])]
    test = pairs[:, np.sort(perm[num_train + num_val :])]
    negatives = sample_negative_edges(num_nodes, pairs, num_val + num_test, rng)
    train_t = torch.from_numpy(train)
    graph = Graph.from_edge_index(train_t, num_nodes, symmetrize=True)
    return LinkSplit(
        graph=graph,
        train_pos=train_t,
        val_pos=torch.from_numpy(val),
        val_neg=torch.from_numpy(negatives[:, :num_val]),
        test_pos=torch.from_numpy(test),
        test_neg=torch.from_numpy(negatives[:, num_val:]),
    )
