"""The CPU sum's AVX-512 kernel (chosen for float32 sums of 4 or more features where the CPU has
AVX-512F/VL) and its AVX2 kernel give bitwise the same sums, forward and backward: on the awkward
graphs (empty, isolated nodes, self loops, duplicates, a huge hub), at every feature width whose
tiles, tails and accumulator sets differ, with col_scale folded into the split pre-scaled copy of
x or applied per edge, with edge weights, with x beyond the prefetch threshold, on one and two
threads. On a CPU without AVX-512 both runs take the AVX2 kernel and the comparison is trivially
true; tests/test_aggregate.py and tests/test_aggregate_sum_tiles.py check both switch settings
against the reference."""

from __future__ import annotations

import pytest
import torch
from graphs import awkward_graphs, random_edges

from galfast import Graph
from galfast._native import _C
from galfast.ops import aggregate

WIDTHS = [4, 5, 7, 8, 9, 12, 15, 16, 17, 20, 21, 24, 25, 31, 32, 33, 36, 40, 47, 48, 49, 52]
WIDTHS += [56, 57, 63, 64, 65, 66, 71, 72, 80, 100, 127, 128, 129, 130, 200]

# (reduce, norm, weighted): gcn folds col_scale into x where there are 32 edges per source or
# more, and applies it per edge otherwise; mean has a row scale only; weights ride on each edge.
MODES = [("sum", "gcn", False), ("mean", None, False), ("sum", None, True), ("sum", "gcn", True)]


def both_paths(run):
    """(result with the AVX-512 sum allowed, result with the AVX2 sum only)."""
    fast = run()
    before = _C.set_aggregate_simd(False)
    try:
        narrow = run()
    finally:
        _C.set_aggregate_simd(before)
    return fast, narrow


def outputs_and_gradients(g: Graph, f: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(g.num_nodes, f, generator=gen)
    w = torch.rand(g.num_edges, generator=gen) + 0.5

    def run():
        results = []
        for reduce, norm, weighted in MODES:
            xg = x.clone().requires_grad_()
            out = aggregate(g, xg, w if weighted else None, reduce=reduce, norm=norm)
            (grad,) = torch.autograd.grad(out, xg, out.detach() + 0.5)
            results += [out.detach(), grad]
        return results

    return both_paths(run)


def assert_bitwise(pair):
    for fast, narrow in zip(*pair):
        assert torch.equal(fast, narrow)


GRAPHS = dict(awkward_graphs())
GRAPHS["dense"] = (random_edges(60, 6000, seed=3), 60)  # 49 edges a source: col_scale folded


@pytest.mark.parametrize("f", WIDTHS)
@pytest.mark.parametrize("name", list(GRAPHS))
def test_simd_and_avx2_sums_are_bitwise_equal(name, f):
    edge_index, n = GRAPHS[name]
    assert_bitwise(outputs_and_gradients(Graph.from_edge_index(edge_index, n), f, seed=f))


@pytest.mark.parametrize("f", [4, 16, 20, 33, 64, 100])
def test_bitwise_equal_with_x_beyond_the_prefetch_threshold(f):
    # 20,000 sources: x (and its copy) above 1 MiB from F = 16, so the prefetching variants run
    g = Graph.from_edge_index(random_edges(20000, 60000, seed=4), 20000)
    assert_bitwise(outputs_and_gradients(g, f, seed=f))


@pytest.mark.parametrize("f", [4, 20, 33, 130])
def test_bitwise_equal_and_thread_independent(f):
    edge_index = torch.cat([random_edges(3000, 40000, seed=5), awkward_graphs()["hub"][0]], 1)
    g = Graph.from_edge_index(edge_index, 3001)
    before = torch.get_num_threads()
    try:
        runs = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            runs.append(outputs_and_gradients(g, f, seed=f))
    finally:
        torch.set_num_threads(before)
    for pair in runs:
        assert_bitwise(pair)
    assert_bitwise((runs[0][0], runs[1][0]))


def test_the_switch_returns_the_previous_setting():
    before = _C.set_aggregate_simd(False)
    try:
        assert _C.set_aggregate_simd(True) is False
        assert _C.set_aggregate_simd(True) is True
    finally:
        _C.set_aggregate_simd(before)


@pytest.mark.parametrize("bad", [-1, 50, 2**31 - 1])
def test_a_bad_index_is_named_on_the_simd_path(bad):
    # edited behind the version counter before the first sum: the int32 copy the kernel reads
    # carries the bad value (it fits in int32), and the kernel's own check names it
    g = Graph.from_edge_index(random_edges(50, 400, seed=6), 50)
    g.col.data[7] = bad
    for norm in ("gcn", None):
        with pytest.raises(
            ValueError, match=rf"aggregate: col\[7\] = {bad} lies outside \[0, 50\)"
        ):
            aggregate(g, torch.randn(50, 20), norm=norm)
