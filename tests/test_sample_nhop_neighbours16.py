"""The 16-bit neighbour ids of the CPU walks (galfast.ops.sample_nhop.walk_neighbours16): graphs
of at most 2^16 nodes get a uint16 copy of out_nbr, which the paper and simple walks (AVX-512,
AVX2 and baseline alike) read instead of the int32 ids. The ends and paths must not change: the
walks with the copy equal the walks without it, in every build, and the Python reference, on
awkward graphs and on graphs whose node ids reach the top of the 16-bit range; larger graphs
keep the int32 path. A CPU without a build's instructions runs the next narrower one, so the
comparisons still hold."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from ref_sample_nhop import reference_sample
from test_sample_nhop import GRAPHS, SEED, SortedRows, all_starts, make_graph

from galfast import Graph
from galfast._native import _C
from galfast.ops import sample_nhop
from galfast.ops.sample_nhop import MODES, launch_sample_nhop, walk_adjacency, walk_neighbours16


def walks(graph, starts, hops, mode, neighbours16, isa="avx512", walk_offset=0):
    """(end, paths) of the launcher, with or without the 16-bit copy, `isa` the widest walks
    allowed ("avx512", "avx2" or "baseline")."""
    before = _C.set_sample_nhop_isa(isa)
    try:
        return launch_sample_nhop(
            *walk_adjacency(graph),
            torch.as_tensor(starts, dtype=torch.long),
            hops,
            SEED % 2**32,
            SEED // 2**32,
            walk_offset,
            MODES[mode],
            3,
            True,
            neighbours16,
        )
    finally:
        _C.set_sample_nhop_isa(before)


def assert_unchanged(graph, starts, hops, mode, reference=None):
    """The 16-bit walks equal the int32 ones, those of the narrower builds and (if given) the
    reference."""
    copy = walk_neighbours16(graph)
    assert copy is not None
    for offset in (0, 1):  # an odd offset starts every block mid-pair
        with16 = walks(graph, starts, hops, mode, copy, walk_offset=offset)
        for other in (
            walks(graph, starts, hops, mode, None, walk_offset=offset),
            *(
                walks(graph, starts, hops, mode, ids, isa=isa, walk_offset=offset)
                for ids in (None, copy)
                for isa in ("avx2", "baseline")
            ),
        ):
            assert torch.equal(with16[0], other[0]) and torch.equal(with16[1], other[1])
    if reference is not None:
        end, paths = walks(graph, starts, hops, mode, copy)
        ref_end, ref_paths = reference_sample(reference, starts, hops, mode, SEED, max_retries=3)
        assert end.tolist() == ref_end and paths.tolist() == ref_paths


def test_copy_holds_the_ids_padded_to_an_even_count():
    for edges, count in (([(0, 1), (1, 2)], 2), ([(0, 1), (1, 2), (2, 2)], 4), ([(0, 1)], 2)):
        graph, _ = make_graph(edges, 3)
        out_nbr = walk_adjacency(graph)[1]
        copy = walk_neighbours16(graph)
        assert copy.dtype == torch.uint16 and copy.numel() == count
        assert torch.equal(copy[: out_nbr.numel()].int(), out_nbr)
        assert walk_neighbours16(graph) is copy  # cached on the graph


@pytest.mark.parametrize("hops", [1, 2, 3, 4])
@pytest.mark.parametrize("mode", ["paper", "simple"])
@pytest.mark.parametrize("name", list(GRAPHS))
def test_awkward_graphs_walk_as_before(name, mode, hops):
    graph, out_rows = GRAPHS[name]()
    starts = all_starts(graph.num_nodes, 3 + 600 // graph.num_nodes)
    assert_unchanged(graph, starts, hops, mode, out_rows)


@pytest.mark.parametrize("mode", ["paper", "simple"])
def test_isolated_nodes_self_loops_duplicates_and_the_last_row(mode):
    # node 6 is isolated, 2 has a self loop, 0 -> 1 is repeated, and the last node's row ends
    # the neighbour array with an odd edge count (the padded word is read by its last slot)
    edges = [(0, 1), (0, 1), (1, 0), (2, 2), (2, 3), (3, 7), (7, 0), (7, 2), (7, 3), (5, 7)]
    graph, out_rows = make_graph(edges, 8)
    assert walk_adjacency(graph)[1].numel() % 2 == 1
    starts = all_starts(8, 40)
    for hops in (1, 2, 3, 4):
        assert_unchanged(graph, starts, hops, mode, out_rows)


def ring_with_chords(num_nodes, seed):
    """(Graph, rows) of a ring over every node plus random chords, many to and from the top ids
    (above 2^15, where a sign mistake would show), and a hub: the last node links to 300 others."""
    rng = np.random.default_rng(seed)
    src = np.concatenate(
        [
            np.arange(num_nodes),
            rng.integers(0, num_nodes, 20_000),
            num_nodes - 1 - rng.integers(0, 64, 5_000),
            np.full(300, num_nodes - 1),
        ]
    )
    dst = np.concatenate(
        [
            (np.arange(num_nodes) + 1) % num_nodes,
            rng.integers(0, num_nodes, 20_000),
            num_nodes - 1 - rng.integers(0, 64, 5_000),
            rng.integers(0, num_nodes, 300),
        ]
    )
    graph = Graph.from_edge_index(torch.from_numpy(np.stack([src, dst])), num_nodes)
    return graph, SortedRows(src, dst, num_nodes)


@pytest.mark.parametrize("num_nodes", [65_535, 65_536])
def test_ids_at_the_top_of_the_16_bit_range(num_nodes):
    graph, rows = ring_with_chords(num_nodes, num_nodes)
    assert walk_adjacency(graph)[1].max() == num_nodes - 1
    starts = [num_nodes - 1] * 50 + random.Random(1).sample(range(num_nodes - 64, num_nodes), 64)
    starts += random.Random(2).sample(range(num_nodes), 1500)
    for mode in ("paper", "simple"):
        for hops in (1, 4):
            assert_unchanged(graph, starts, hops, mode, rows)


def test_larger_graphs_keep_the_int32_ids():
    graph, rows = ring_with_chords(65_537, 3)
    assert walk_neighbours16(graph) is None
    starts = random.Random(3).sample(range(65_537), 500) + [65_536] * 20
    for mode in ("paper", "simple"):
        end, paths = walks(graph, starts, 2, mode, None)
        ref_end, ref_paths = reference_sample(rows, starts, 2, mode, SEED, max_retries=3)
        assert end.tolist() == ref_end and paths.tolist() == ref_paths


def test_bad_starts_still_raise():
    graph, _ = GRAPHS["hub"]()
    starts = all_starts(graph.num_nodes, 3)
    starts[700] = graph.num_nodes
    with pytest.raises(ValueError, match=f"start {graph.num_nodes} of walk 700 "):
        walks(graph, starts, 1, "paper", walk_neighbours16(graph))


def test_the_kernel_refuses_a_copy_it_cannot_use():
    graph, _ = make_graph([(0, 1), (1, 0)], 2)
    adj = tuple(t.long() for t in walk_adjacency(graph))
    starts, end = torch.tensor([0, 1]), torch.empty(2, dtype=torch.long)
    p = _C.SampleNhopParams()
    p.out_ptr, p.out_nbr, p.in_ptr, p.in_nbr = (t.data_ptr() for t in adj)
    p.out_nbr16 = walk_neighbours16(graph).data_ptr()
    p.starts, p.end, p.num_nodes, p.num_walks = starts.data_ptr(), end.data_ptr(), 2, 2
    p.index_type = _C.IndexType.INT64
    with pytest.raises(ValueError, match="16-bit neighbour ids"):
        _C.sample_nhop_cpu(p)
    p.index_type, p.num_nodes = _C.IndexType.INT32, 2**16 + 1
    with pytest.raises(ValueError, match="16-bit neighbour ids"):
        _C.sample_nhop_cpu(p)


def test_empty_graph_needs_no_copy():
    graph = Graph.from_edge_index(torch.zeros((2, 0), dtype=torch.long), 3)
    assert sample_nhop(graph, torch.tensor([0, 2]), 1, seed=SEED).tolist() == [-1, -1]
