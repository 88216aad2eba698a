"""The CPU walks' three builds agree: the AVX-512 block walks (chosen where the CPU has
AVX-512F/BW/DQ/VL and the adjacency is int32), the AVX2 ones (chosen where it has AVX2 only) and
the baseline ones, bit for bit, on every awkward shape their lanes and blocks meet: partial lane
groups and blocks, walk numbers that start a block in the middle of a hash pair, redraws, failed
walks, row offsets too large for the cache, out-of-range starts anywhere in the batch, and the
non-temporal stores of a large call's ends. A CPU without a build's instructions runs the next
narrower one, so there the comparison is trivially true; tests/test_sample_nhop.py checks
whichever path runs against the Python reference."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from test_sample_nhop import GRAPHS, SEED, all_starts

from galfast import Graph
from galfast._native import _C
from galfast.ops import sample_nhop
from galfast.ops.sample_nhop import walk_adjacency, walk_neighbours16


def all_builds(run):
    """run()'s result with each build the widest allowed: AVX-512, AVX2, baseline."""
    results = []
    for isa in ("avx512", "avx2", "baseline"):
        before = _C.set_sample_nhop_isa(isa)
        try:
            results.append(run())
        finally:
            _C.set_sample_nhop_isa(before)
    return results


def assert_same(builds):
    """Every build's (ends, paths) equal the first one's."""
    first = builds[0]
    for other in builds[1:]:
        assert torch.equal(first[0], other[0]) and torch.equal(first[1], other[1])


@pytest.mark.parametrize("hops", [1, 2, 3, 5, 9])
@pytest.mark.parametrize("mode", ["paper", "simple"])
@pytest.mark.parametrize("name", list(GRAPHS))
def test_simd_and_baseline_walks_agree(name, mode, hops):
    graph, _ = GRAPHS[name]()
    # 1,000 + a few walks: several blocks of 64, a last block and lane group cut short
    starts = torch.tensor(all_starts(graph.num_nodes, 3 + 1000 // graph.num_nodes)[:1003])
    for offset in (0, 1, 2**40 + 7):  # an odd offset starts every block mid-pair
        builds = all_builds(
            lambda offset=offset: sample_nhop(
                graph, starts, hops, seed=SEED, mode=mode, return_paths=True, walk_offset=offset
            )
        )
        assert_same(builds)


@pytest.mark.parametrize("count", [1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 255, 257])
def test_partial_groups_and_blocks(count):
    graph, _ = GRAPHS["hub"]()
    starts = torch.tensor(all_starts(graph.num_nodes, 1)[:count])
    builds = all_builds(
        lambda: sample_nhop(graph, starts, 3, seed=SEED, return_paths=True, walk_offset=count)
    )
    assert_same(builds)
    # a prefix of the batch is walked as in the whole batch, however the blocks fall
    prefixes = all_builds(
        lambda: sample_nhop(
            graph, starts[: count // 2], 3, seed=SEED, return_paths=True, walk_offset=count
        )
    )
    assert_same([(builds[0][0][: count // 2], builds[0][1][: count // 2]), *prefixes])


def test_redraws_and_failures_in_every_lane():
    # a triangle with a tail: paper walks often draw a node already on the path (redraws) and
    # simple walks get stuck (failures), in every lane position
    graph = Graph.from_edge_index(
        torch.tensor([[0, 1, 1, 2, 2, 0, 2, 3], [1, 0, 2, 1, 0, 2, 3, 2]]), 4
    )
    starts = torch.tensor([random.Random(1).randrange(4) for _ in range(3000)])
    for mode in ("paper", "simple"):
        builds = all_builds(
            lambda mode=mode: sample_nhop(graph, starts, 3, seed=SEED, mode=mode, return_paths=True)
        )
        assert_same(builds)
        assert (builds[0][0] == -1).any() and (builds[0][0] >= 0).any()


def test_row_offsets_beyond_the_cache():
    # above 2^17 nodes the row offsets are read in a prefetched loop of their own
    num_nodes = 150_000
    edges = np.random.default_rng(7).integers(0, num_nodes, size=(2, 300_000))
    graph = Graph.from_edge_index(torch.from_numpy(edges), num_nodes, symmetrize=True)
    starts = torch.from_numpy(np.random.default_rng(8).integers(0, num_nodes, 5000))
    assert_same(
        all_builds(
            lambda: sample_nhop(graph, starts, 4, seed=SEED, return_paths=True, walk_offset=3)
        )
    )


@pytest.mark.parametrize("bad_walk", [0, 5, 64, 65, 128, 129, 4999])
@pytest.mark.parametrize("bad_value", [-1, 40, 2**40])
def test_out_of_range_start_is_named_by_every_build(bad_walk, bad_value):
    graph, _ = GRAPHS["undirected"]()
    starts = torch.tensor(all_starts(graph.num_nodes, 125)[:5000])
    starts[bad_walk] = bad_value
    starts[min(bad_walk + 300, 4999)] = -7  # a later bad start is not the one named
    if bad_walk == 4999:
        starts[4999] = bad_value
    message = f"start {bad_value} of walk {bad_walk} "

    def run():
        with pytest.raises(ValueError, match=message):
            sample_nhop(graph, starts, 2, seed=SEED)

    all_builds(run)


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
@pytest.mark.parametrize("hops", [1, 2])
@pytest.mark.parametrize("shift", [0, 1, 4, 8])
def test_large_calls_stream_the_same_ends(hops, shift, isa):
    # A call of at least 2^18 walks writes its ends with non-temporal stores where a lane group
    # is full and aligned to its store width (64 bytes for AVX-512, 32 for AVX2; masked stores
    # elsewhere): the ends equal the baseline walks' and those of small calls (normal stores),
    # for an output starting on a cache line, on a 32-byte boundary only, or off both.
    graph, _ = GRAPHS["hub"]()
    count = 300_007
    starts = torch.from_numpy(np.random.default_rng(hops).integers(0, graph.num_nodes, count))
    out = torch.full((count + shift,), -2, dtype=torch.long)
    p = _C.SampleNhopParams()
    adj = walk_adjacency(graph)
    p.out_ptr, p.out_nbr, p.in_ptr, p.in_nbr = (t.data_ptr() for t in adj)
    p.out_nbr16 = walk_neighbours16(graph).data_ptr()
    p.starts, p.end = starts.data_ptr(), out[shift:].data_ptr()
    p.num_nodes, p.num_walks, p.hops, p.seed = graph.num_nodes, count, hops, SEED
    p.index_type = _C.IndexType.INT32
    before = _C.set_sample_nhop_isa(isa)
    try:
        _C.sample_nhop_cpu(p)
        _C.set_sample_nhop_isa("baseline")
        baseline = sample_nhop(graph, starts, hops, seed=SEED)
    finally:
        _C.set_sample_nhop_isa(before)
    assert (out[:shift] == -2).all()
    assert torch.equal(out[shift:], baseline)
    pieces = [
        sample_nhop(graph, starts[i : i + 1000], hops, seed=SEED, walk_offset=i)
        for i in range(0, 20_000, 1000)
    ]
    assert torch.equal(out[shift : shift + 20_000], torch.cat(pieces))


def test_unknown_isa_is_named():
    with pytest.raises(ValueError, match="'avx3' is not one of"):
        _C.set_sample_nhop_isa("avx3")
