"""The seeded link-prediction split and the negative sampler."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from galfast.datasets import random_link_split, sample_negative_edges
from galfast.datasets.link_split import undirected_pairs


def _ring_with_chords(num_nodes=60):
    ring = np.stack([np.arange(num_nodes), (np.arange(num_nodes) + 1) % num_nodes])
    chords = np.stack([np.arange(0, num_nodes, 3), (np.arange(0, num_nodes, 3) + 7) % num_nodes])
    return undirected_pairs(np.concatenate([ring, chords], axis=1)), num_nodes


def _keys(pairs):
    return set(map(tuple, torch.as_tensor(pairs).t().tolist()))


def test_undirected_pairs_merges_directions_duplicates_and_self_loops():
    edges = np.array([[0, 1, 1, 2, 2, 3], [1, 0, 1, 3, 3, 0]])
    assert undirected_pairs(edges).tolist() == [[0, 0, 2], [1, 3, 3]]
    assert undirected_pairs(np.zeros((2, 0), dtype=np.int64)).shape == (2, 0)


def test_split_sizes_follow_pyg_defaults():
    pairs, n = _ring_with_chords()
    split = random_link_split(pairs, n, seed=0)
    num_pairs = pairs.shape[1]
    num_val, num_test = int(0.05 * num_pairs), int(0.1 * num_pairs)
    assert split.val_pos.shape == split.val_neg.shape == (2, num_val)
    assert split.test_pos.shape == split.test_neg.shape == (2, num_test)
    assert split.train_pos.size(1) == num_pairs - num_val - num_test


def test_positive_sets_partition_the_edges_and_negatives_are_non_edges():
    pairs, n = _ring_with_chords()
    split = random_link_split(pairs, n, val_fraction=0.1, test_fraction=0.2, seed=4)
    train, val, test = _keys(split.train_pos), _keys(split.val_pos), _keys(split.test_pos)
    assert train | val | test == _keys(pairs)
    assert len(train) + len(val) + len(test) == pairs.shape[1]
    val_neg, test_neg = _keys(split.val_neg), _keys(split.test_neg)
    assert len(val_neg) == split.val_neg.size(1) and len(test_neg) == split.test_neg.size(1)
    assert not (val_neg | test_neg) & _keys(pairs) and not val_neg & test_neg
    for tensor in (split.train_pos, split.val_pos, split.val_neg, split.test_pos, split.test_neg):
        assert tensor.dtype == torch.int64 and bool((tensor[0] < tensor[1]).all())


def test_message_passing_graph_has_training_edges_only_both_ways():
    pairs, n = _ring_with_chords()
    split = random_link_split(pairs, n, seed=1)
    train = _keys(split.train_pos)
    assert _keys(split.graph.edge_index()) == train | {(v, u) for u, v in train}
    assert split.graph.num_nodes == n


def test_split_is_reproducible_and_seed_dependent():
    pairs, n = _ring_with_chords()
    a, b, c = (random_link_split(pairs, n, seed=s) for s in (7, 7, 8))
    for name in ("train_pos", "val_pos", "val_neg", "test_pos", "test_neg"):
        assert torch.equal(getattr(a, name), getattr(b, name))
    assert not torch.equal(a.test_pos, c.test_pos)


def test_bad_fractions():
    pairs, n = _ring_with_chords()
    with pytest.raises(ValueError, match="sum below 1"):
        random_link_split(pairs, n, val_fraction=0.5, test_fraction=0.5)
    with pytest.raises(ValueError, match=r"^val_fraction must lie in \[0, 1\), got -0.1"):
        random_link_split(pairs, n, val_fraction=-0.1)
    with pytest.raises(ValueError, match="^test_fraction must be a finite number, got nan"):
        random_link_split(pairs, n, test_fraction=float("nan"))


def test_negative_sampler_can_exhaust_the_non_edges():
    # Complete graph on 6 nodes minus 3 edges: exactly 3 non-edges exist.
    all_pairs = np.array([(u, v) for u in range(6) for v in range(u + 1, 6)]).T
    forbidden = all_pairs[:, 3:]
    rng = np.random.default_rng(0)
    drawn = sample_negative_edges(6, forbidden[::-1], 3, rng)  # pair order must not matter
    assert _keys(drawn) == _keys(all_pairs[:, :3])
    with pytest.raises(ValueError, match="only 3 node pairs"):
        sample_negative_edges(6, forbidden, 4, rng)


def test_negative_sampler_is_uniform_over_allowed_pairs():
    rng = np.random.default_rng(3)
    forbidden = np.array([[0, 1], [1, 2]])  # pairs (0,1), (1,2) are edges
    counts = {}
    for _ in range(3000):
        (u,), (v,) = sample_negative_edges(4, forbidden, 1, rng)
        counts[(int(u), int(v))] = counts.get((int(u), int(v)), 0) + 1
    assert set(counts) == {(0, 2), (0, 3), (1, 3), (2, 3)}
    assert all(abs(c / 3000 - 0.25) < 0.04 for c in counts.values())


def _split():
    return random_link_split(*_ring_with_chords(), seed=0)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("val_pos", lambda t: t.t().contiguous(), r"val_pos must be a \[2, k\] tensor of node ids"),
        ("test_neg", lambda t: t.float(), r"test_neg must be a \[2, k\] tensor of node ids"),
        ("train_pos", lambda t: t.numpy(), r"train_pos must be a \[2, k\] tensor, got ndarray"),
        ("val_neg", lambda t: t + 60, r"val_neg holds a node id outside \[0, 60\)"),
        ("test_pos", lambda t: t - 100, r"test_pos holds a node id outside \[0, 60\)"),
        ("graph", lambda g: g.edge_index(), "graph must be a galfast.Graph"),
    ],
)
def test_a_hand_built_split_is_checked(field, value, message):
    # [k, 2] pairs, float ids or ids past the graph were read as other pairs by the link
    # losses and metrics
    good = _split()
    fields = {name: getattr(good, name) for name in good.__dataclass_fields__}
    fields[field] = value(fields[field])
    with pytest.raises(ValueError, match=message):
        type(good)(**fields)
