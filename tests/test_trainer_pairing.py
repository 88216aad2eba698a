"""Pairing policies: parsing, the identity pairing, and walks through galfast.ops.sample_nhop."""

import pytest
import torch

import galfast
from galfast import Graph
from galfast.train import Pairing, pair_nodes, parse_pairing

needs_sampler = pytest.mark.skipif(
    not hasattr(galfast.ops, "sample_nhop"),
    reason="galfast.ops.sample_nhop is not built in this tree",
)


@pytest.mark.parametrize(
    "spec, hops, name",
    [
        ("node", 0, "node"),
        ("neighbor", 1, "neighbor"),
        ("neighbour", 1, "neighbor"),
        (("nhop", 1), 1, "neighbor"),
        (("nhop", 3), 3, "nhop:3"),
        ("nhop:2", 2, "nhop:2"),
        (Pairing(4), 4, "nhop:4"),
    ],
)
def test_parse_pairing(spec, hops, name):
    parsed = parse_pairing(spec)
    assert parsed.hops == hops and parsed.name == name
    assert parse_pairing(parsed.name) == parsed


@pytest.mark.parametrize(
    "spec",
    [
        "nodes",
        "nhop",
        "nhop:0",
        "nhop:-1",
        "nhop:x",
        ("nhop", 0),
        ("nhop", 2.0),
        ("nhop", True),
        ("hop", 2),
        3,
        None,
    ],
)
def test_unknown_pairing_raises(spec):
    with pytest.raises(ValueError, match="unknown pairing"):
        parse_pairing(spec)


def test_node_pairing_is_the_identity():
    graph = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), 3)
    nodes = torch.tensor([2, 0])
    paired = pair_nodes(graph, nodes, parse_pairing("node"), seed=0)
    assert paired.keep.tolist() == [0, 1]
    assert paired.partners.tolist() == [2, 0]
    assert paired.failures == 0


@needs_sampler
def test_neighbor_pairing_reads_a_neighbour_and_drops_isolated_nodes():
    # 0 - 1 - 2 path, 3 isolated.
    graph = Graph.from_edge_index(torch.tensor([[0, 1], [1, 2]]), 4, symmetrize=True)
    nodes = torch.tensor([0, 1, 2, 3, 1])
    paired = pair_nodes(graph, nodes, parse_pairing("neighbor"), seed=7)
    assert paired.failures == 1
    assert paired.keep.tolist() == [0, 1, 2, 4]
    neighbours = {0: {1}, 1: {0, 2}, 2: {1}}
    for pos, partner in zip(paired.keep.tolist(), paired.partners.tolist()):
        assert partner in neighbours[nodes[pos].item()]
    again = pair_nodes(graph, nodes, parse_pairing("neighbor"), seed=7)
    assert torch.equal(again.partners, paired.partners)


@needs_sampler
def test_nhop_pairing_ends_within_n_hops():
    # A path 0-1-2-3-4-5: a 2-hop walk from v ends at distance 1 or 2 (paper mode).
    src = torch.arange(5)
    graph = Graph.from_edge_index(torch.stack([src, src + 1]), 6, symmetrize=True)
    nodes = torch.arange(6).repeat(20)
    paired = pair_nodes(graph, nodes, parse_pairing("nhop:2"), seed=3)
    distance = (paired.partners - nodes[paired.keep]).abs()
    assert paired.keep.numel() + paired.failures == nodes.numel()
    assert bool(((distance >= 0) & (distance <= 2)).all())
    assert bool((distance == 2).any())
