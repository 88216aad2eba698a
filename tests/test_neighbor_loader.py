"""galfast.ops.NeighborLoader: every seed once per epoch, reproducible epochs, independent
batches, and bad input."""

from __future__ import annotations

import pytest
import torch
from graphs import random_edges

from galfast import Graph
from galfast.ops import NeighborLoader, sample_neighbors


def graph() -> Graph:
    return Graph.from_edge_index(random_edges(200, 2000, seed=8), 200)


def batches_as_lists(batches) -> list:
    return [
        (b.batch, b.seeds.tolist(), [(x.src_nodes.tolist(), x.col.tolist()) for x in b.blocks])
        for b in batches
    ]


def test_every_seed_once_per_epoch_in_batches_of_the_size():
    nodes = torch.arange(10, 110)
    loader = NeighborLoader(graph(), nodes, [3, 2], 32, seed=1)
    batches = list(loader.epoch(0))
    assert len(loader) == len(batches) == 4
    assert [b.seeds.numel() for b in batches] == [32, 32, 32, 4]
    assert sorted(torch.cat([b.seeds for b in batches]).tolist()) == nodes.tolist()
    assert not torch.equal(torch.cat([b.seeds for b in batches]), nodes)  # shuffled
    assert [b.batch for b in batches] == [0, 1, 2, 3]
    for b in batches:
        assert torch.equal(b.blocks[0].dst_nodes, b.seeds)
        assert torch.equal(b.input_nodes, b.blocks[-1].src_nodes)


def test_epochs_are_reproducible_and_differ():
    g = graph()
    a = NeighborLoader(g, None, [3, 2], 50, seed=4)
    b = NeighborLoader(g, None, [3, 2], 50, seed=4)
    first, second = batches_as_lists(a), batches_as_lists(a)  # iterating runs epochs 0, 1
    assert first == batches_as_lists(b.epoch(0))
    assert second == batches_as_lists(b.epoch(1))
    assert first != second
    assert [x[0] for x in second] == [4, 5, 6, 7]  # batch counters continue across epochs
    other = NeighborLoader(g, None, [3, 2], 50, seed=5)
    assert batches_as_lists(other.epoch(0)) != first


def test_batch_is_sample_neighbors_with_the_batch_counter():
    g = graph()
    loader = NeighborLoader(g, None, [4], 64, seed=9, shuffle=False)
    batch = list(loader.epoch(2))[1]
    expected = sample_neighbors(g, torch.arange(64, 128), [4], seed=9, batch=2 * 4 + 1)
    assert batch.batch == 9 and torch.equal(batch.seeds, torch.arange(64, 128))
    assert torch.equal(batch.blocks[0].edge_id, expected[0].edge_id)


def test_drop_last():
    loader = NeighborLoader(graph(), torch.arange(100), [2], 32, seed=0, drop_last=True)
    assert len(loader) == 3 and [b.seeds.numel() for b in loader.epoch(0)] == [32, 32, 32]


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"nodes": [1, 2]}, "nodes must be a torch.Tensor"),
        ({"nodes": torch.tensor([1.0])}, "nodes must be a 1-D int64/int32"),
        ({"nodes": torch.tensor([1, 1])}, "twice"),
        ({"nodes": torch.tensor([500])}, "not a node id"),
        ({"batch_size": 0}, "batch_size must lie in"),
        ({"seed": -1}, "seed must lie in"),
        # was accepted, and failed only when an epoch first drew a batch
        ({"edge_weight": torch.ones(7)}, "edge_weight must have shape"),
        ({"edge_weight": "weights"}, "edge_weight must be a torch.Tensor"),
    ],
)
def test_bad_input(kwargs, message):
    args = {"nodes": None, "fanouts": [2], "batch_size": 4, "seed": 0, **kwargs}
    with pytest.raises(ValueError, match=message):
        NeighborLoader(
            graph(), args.pop("nodes"), args.pop("fanouts"), args.pop("batch_size"), **args
        )
