"""galfast.ops.sample_nhop: bit-exact agreement with the Python reference, validity of every
walk, exact mode against BFS, reproducibility, awkward graphs, bad input, CPU vs CUDA."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from ref_sample_nhop import adjacency, bfs_distance, reference_sample

from galfast import Graph
from galfast._native import _C
from galfast.ops import sample_nhop
from galfast.ops.sample_nhop import MODES, walk_adjacency

SEED = 0x5EED_1234_ABCD


def make_graph(edges, num_nodes, *, symmetrize=False):
    """(Graph, out_rows) for an edge list of (source, target) pairs."""
    index = torch.tensor(edges, dtype=torch.long).reshape(-1, 2).t()
    graph = Graph.from_edge_index(index, num_nodes, symmetrize=symmetrize)
    pairs = list(edges) + ([(t, s) for s, t in edges] if symmetrize else [])
    return graph, adjacency(pairs, num_nodes)


def random_edges(num_nodes, num_edges, seed):
    """Random pairs, self loops and repeats included."""
    rng = random.Random(seed)
    return [(rng.randrange(num_nodes), rng.randrange(num_nodes)) for _ in range(num_edges)]


GRAPHS = {
    "undirected": lambda: make_graph(random_edges(40, 90, 1), 40, symmetrize=True),
    "directed": lambda: make_graph(random_edges(40, 120, 2), 40),
    "dense": lambda: make_graph(random_edges(12, 70, 3), 12, symmetrize=True),
    # users 0..19 rating items 20..34, like MovieLens: rows of disjoint id ranges
    "bipartite": lambda: make_graph(
        [(u, 20 + i) for u, i in random_edges(20, 80, 4) if i < 15], 35, symmetrize=True
    ),
    # a hub joined to 300 leaves, the leaves in a ring: rows of very different lengths
    "hub": lambda: make_graph(
        [(0, v) for v in range(1, 301)] + [(v, v % 300 + 1) for v in range(1, 301)],
        301,
        symmetrize=True,
    ),
}


def all_starts(num_nodes, repeats, seed=0):
    starts = list(range(num_nodes)) * repeats
    random.Random(seed).shuffle(starts)
    return starts


@pytest.mark.parametrize("hops", [1, 2, 3, 4])
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("name", list(GRAPHS))
def test_matches_reference_bit_for_bit(name, mode, hops):
    graph, out_rows = GRAPHS[name]()
    starts = all_starts(graph.num_nodes, 2 if graph.num_nodes > 100 else 6)
    end, paths = sample_nhop(
        graph, torch.tensor(starts), hops, seed=SEED, mode=mode, max_retries=3, return_paths=True
    )
    ref_end, ref_paths = reference_sample(out_rows, starts, hops, mode, SEED, max_retries=3)
    assert end.tolist() == ref_end
    assert paths.tolist() == ref_paths


class SortedRows:
    """Distinct out-neighbours of each node, sorted, from numpy edge arrays; a row is sliced
    out when asked for (a reference walk touches few of a large graph's nodes)."""

    def __init__(self, src, dst, num_nodes):
        key = np.unique(src * num_nodes + dst)
        self.src, self.dst = key // num_nodes, key % num_nodes

    def __getitem__(self, node):
        begin, end = np.searchsorted(self.src, [node, node + 1])
        return self.dst[begin:end].tolist()


def test_large_graph_matches_reference():
    # Above 2^17 nodes the row offsets outgrow the CPU kernel's cache threshold, so walkers
    # read each row in a separate, prefetched visit: the other path through the kernel.
    num_nodes = 150_000
    edges = np.random.default_rng(5).integers(0, num_nodes, size=(2, 400_000))
    graph = Graph.from_edge_index(torch.from_numpy(edges), num_nodes)
    out_rows = SortedRows(edges[0], edges[1], num_nodes)
    starts = random.Random(6).sample(range(num_nodes), 200)
    for mode in MODES:
        end, paths = sample_nhop(
            graph, torch.tensor(starts), 4, seed=SEED, mode=mode, max_retries=2, return_paths=True
        )
        ref_end, ref_paths = reference_sample(out_rows, starts, 4, mode, SEED, max_retries=2)
        assert end.tolist() == ref_end and paths.tolist() == ref_paths, mode
        assert (end >= 0).sum() > 50


def check_walk(out_rows, start, hops, mode, end, path):
    """Every rule a single walk must obey; returns the hop where it stopped."""
    assert path[0] == start
    taken = [v for v in path if v >= 0]
    assert path[len(taken) :] == [-1] * (hops + 1 - len(taken))
    for u, v in zip(taken, taken[1:]):
        assert v in out_rows[u], f"{u} -> {v} is not an edge"
    blocked_from = 1 if mode == "paper" else 0
    assert len(set(taken[blocked_from:])) == len(taken) - blocked_from, f"repeat in {path}"
    if end >= 0:
        assert len(taken) == hops + 1 and end == taken[-1]
    elif len(taken) < hops + 1:
        # stuck: every out-neighbour of the last node was already on the path
        assert set(out_rows[taken[-1]]) <= set(taken[blocked_from:])
    return len(taken) - 1


@pytest.mark.parametrize("mode", ["paper", "simple"])
@pytest.mark.parametrize("name", ["undirected", "directed", "hub"])
def test_every_walk_is_valid(name, mode):
    graph, out_rows = GRAPHS[name]()
    starts = all_starts(graph.num_nodes, 25)
    hops = 4
    end, paths = sample_nhop(
        graph, torch.tensor(starts), hops, seed=SEED, mode=mode, return_paths=True
    )
    stopped = [
        check_walk(out_rows, s, hops, mode, e, p)
        for s, e, p in zip(starts, end.tolist(), paths.tolist())
    ]
    assert hops in stopped  # the checks above saw complete walks, not only failures
    if mode == "paper" and name != "directed":
        assert any(p[2] == p[0] for p in paths.tolist()), "paper walks may return to the start"


@pytest.mark.parametrize("hops", [1, 2, 3, 4])
@pytest.mark.parametrize("name", ["undirected", "directed", "dense"])
def test_exact_mode_ends_at_exact_distance(name, hops):
    graph, out_rows = GRAPHS[name]()
    starts = all_starts(graph.num_nodes, 10)
    end, paths = sample_nhop(
        graph, torch.tensor(starts), hops, seed=SEED, mode="exact", return_paths=True
    )
    for s, e, p in zip(starts, end.tolist(), paths.tolist()):
        check_walk(out_rows, s, hops, "exact", e, p)
        if e >= 0:
            assert bfs_distance(out_rows, s, e) == hops
        elif -1 not in p:  # the final attempt completed, so it ended too close
            assert bfs_distance(out_rows, s, p[-1]) < hops
    reachable = [
        s
        for s in set(starts)
        if any(bfs_distance(out_rows, s, v) == hops for v in range(graph.num_nodes))
    ]
    assert (end >= 0).any() or not reachable


@pytest.mark.parametrize("hops", [2, 3, 4])
def test_exact_mode_fails_everywhere_without_a_node_at_that_distance(hops):
    # every node of K_6 is at distance 1 from every other; hops - 1 more hops cannot go farther
    graph, _ = make_graph([(u, v) for u in range(6) for v in range(6) if u != v], 6)
    starts = torch.arange(6).repeat(20)
    end, paths = sample_nhop(
        graph, starts, hops, seed=SEED, mode="exact", max_retries=5, return_paths=True
    )
    assert (end == -1).all()
    assert (paths != -1).all()  # each final attempt completed its path but ended too close
    simple = sample_nhop(graph, starts, hops, seed=SEED, mode="simple")
    assert (simple >= 0).all()  # the same walks succeed when the distance is not checked


def test_exact_mode_on_a_path_reaches_the_far_end():
    graph, _ = make_graph([(v, v + 1) for v in range(5)], 6, symmetrize=True)
    end = sample_nhop(graph, torch.zeros(50, dtype=torch.long), 4, seed=SEED, mode="exact")
    assert (end == 4).all()


def test_exact_mode_retries_draw_fresh_randomness():
    # From 0: 0-1-2 reaches distance 2, 0-3-... is a dead end; a walk that is stuck at 3 is
    # retried and eventually takes 1. Without retries about half the walks fail.
    graph, _ = make_graph([(0, 1), (1, 2), (0, 3)], 4, symmetrize=True)
    starts = torch.zeros(400, dtype=torch.long)
    once = sample_nhop(graph, starts, 2, seed=SEED, mode="exact", max_retries=0)
    retried = sample_nhop(graph, starts, 2, seed=SEED, mode="exact", max_retries=16)
    assert 120 < int((once == -1).sum()) < 280
    assert (retried == 2).all()


def test_same_seed_same_result_across_runs_and_thread_counts():
    graph, _ = GRAPHS["undirected"]()
    # 60,000 walks: enough work for the CPU kernel to use every thread it is given
    starts = torch.randint(0, graph.num_nodes, (60000,), generator=torch.Generator().manual_seed(0))
    previous = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2, 3, 2):
            torch.set_num_threads(threads)
            results += [
                sample_nhop(graph, starts, 3, seed=SEED, mode=m, return_paths=True) for m in MODES
            ]
    finally:
        torch.set_num_threads(previous)
    for k, result in enumerate(results):
        expected = results[k % len(MODES)]
        assert torch.equal(result[0], expected[0]) and torch.equal(result[1], expected[1])


def test_batch_splits_reproduce_the_whole_batch():
    graph, _ = GRAPHS["undirected"]()
    starts = torch.tensor(all_starts(graph.num_nodes, 50))
    whole = sample_nhop(graph, starts, 3, seed=SEED)
    pieces = [
        sample_nhop(graph, starts[a:b], 3, seed=SEED, walk_offset=a)
        for a, b in ((0, 1), (1, 777), (777, 1500), (1500, 2000))
    ]
    assert torch.equal(torch.cat(pieces), whole)
    assert torch.equal(sample_nhop(graph, starts[:100], 3, seed=SEED), whole[:100])


def test_different_seeds_and_walk_numbers_differ():
    graph, _ = GRAPHS["undirected"]()
    starts = torch.full((500,), 3, dtype=torch.long)
    a = sample_nhop(graph, starts, 2, seed=1)
    b = sample_nhop(graph, starts, 2, seed=2)
    c = sample_nhop(graph, starts, 2, seed=2**40 + 1)  # the seed's high word counts too
    assert not torch.equal(a, b) and not torch.equal(a, c)
    assert len(set(a.tolist())) > 3  # walks sharing a start are not copies of each other


def test_index_width_does_not_change_results():
    graph, _ = GRAPHS["directed"]()
    starts = torch.tensor(all_starts(graph.num_nodes, 10))
    adjacency32 = walk_adjacency(graph)
    assert adjacency32[1].dtype == torch.int32
    for mode, code in MODES.items():
        results = []
        for adj in (adjacency32, tuple(t.long() for t in adjacency32)):
            end = torch.empty_like(starts)
            p = _C.SampleNhopParams()
            p.out_ptr, p.out_nbr, p.in_ptr, p.in_nbr = (t.data_ptr() for t in adj)
            p.starts, p.end = starts.data_ptr(), end.data_ptr()
            p.num_nodes, p.num_walks, p.hops, p.seed = graph.num_nodes, starts.numel(), 3, SEED
            p.max_retries, p.mode = 4, _C.WalkMode(code)
            p.index_type = _C.IndexType.INT32 if adj[1].dtype == torch.int32 else _C.IndexType.INT64
            _C.sample_nhop_cpu(p)
            results.append(end)
        assert torch.equal(results[0], results[1]), mode


# ---------------------------------------------------------------- awkward graphs


def test_empty_graph_and_empty_batch():
    empty = Graph.from_edge_index(torch.empty(2, 0, dtype=torch.long), 0)
    end, paths = sample_nhop(empty, torch.empty(0, dtype=torch.long), 2, seed=0, return_paths=True)
    assert end.shape == (0,) and paths.shape == (0, 3)
    with pytest.raises(ValueError, match="not a node id"):
        sample_nhop(empty, torch.tensor([0]), 1, seed=0)


@pytest.mark.parametrize("mode", list(MODES))
def test_isolated_starts_fail_at_once(mode):
    graph, _ = make_graph([(0, 1), (1, 2)], 5, symmetrize=True)  # 3 and 4 are isolated
    end, paths = sample_nhop(
        graph, torch.tensor([3, 4, 3]), 2, seed=0, mode=mode, return_paths=True
    )
    assert end.tolist() == [-1, -1, -1]
    assert paths.tolist() == [[3, -1, -1], [4, -1, -1], [3, -1, -1]]


def test_self_loops_are_edges_in_paper_mode_only():
    graph, _ = make_graph([(0, 0), (0, 1)], 2)  # 0 has a loop and an edge to 1
    starts = torch.zeros(400, dtype=torch.long)
    paper = sample_nhop(graph, starts, 1, seed=SEED, mode="paper")
    simple = sample_nhop(graph, starts, 1, seed=SEED, mode="simple")
    assert set(paper.tolist()) == {0, 1}  # the start is not on the path: the loop may be taken
    assert set(simple.tolist()) == {1}
    # a loop never helps after the first hop: the current node is on the path
    two = sample_nhop(graph, starts, 2, seed=SEED, mode="paper", return_paths=True)[1]
    assert {tuple(p) for p in two.tolist()} == {(0, 0, 1), (0, 1, -1)}


def test_duplicate_and_parallel_typed_edges_count_once():
    edges = [(0, 1), (1, 2), (2, 0), (0, 3), (3, 1)]
    plain = make_graph(edges, 4, symmetrize=True)[0]
    repeated = make_graph(edges * 3 + [(1, 0), (1, 0)], 4, symmetrize=True)[0]
    index = torch.tensor(edges * 2).t()
    typed = Graph.from_edge_index(index, 4, edge_type=torch.arange(10) % 2, symmetrize=True)
    assert typed.num_edges == 2 * plain.num_edges  # parallel edges of two types
    starts = torch.tensor(all_starts(4, 200))
    for mode in MODES:
        expected = sample_nhop(plain, starts, 3, seed=SEED, mode=mode)
        assert torch.equal(sample_nhop(repeated, starts, 3, seed=SEED, mode=mode), expected)
        assert torch.equal(sample_nhop(typed, starts, 3, seed=SEED, mode=mode), expected)


def test_a_hub_spreads_walks_over_all_its_leaves():
    leaves = 2000
    graph, _ = make_graph([(0, v) for v in range(1, leaves + 1)], leaves + 1, symmetrize=True)
    starts = torch.full((20000,), 5, dtype=torch.long)
    paper = sample_nhop(graph, starts, 2, seed=SEED, mode="paper")
    simple = sample_nhop(graph, starts, 2, seed=SEED, mode="simple")
    assert 1 <= int((paper == 5).sum()) <= 40  # the start is one of 2000 leaves: ~10 returns
    assert not (simple == 5).any() and (simple > 0).all()
    assert len(set(simple.tolist())) > 1800  # 20000 draws cover nearly all 1999 other leaves


def test_directed_walks_follow_out_edges():
    graph, _ = make_graph([(0, 1), (1, 2), (2, 3), (4, 3)], 5)  # 0 -> 1 -> 2 -> 3 <- 4
    end = sample_nhop(graph, torch.tensor([0, 1, 3, 4]), 1, seed=0)
    assert end.tolist() == [1, 2, -1, 3]
    assert sample_nhop(graph, torch.tensor([0]), 3, seed=0, mode="exact").tolist() == [3]


# ---------------------------------------------------------------- the op and bad input


def test_opcheck():
    graph, _ = GRAPHS["directed"]()
    from galfast.ops.sample_nhop import _sample_nhop_op

    starts = torch.tensor(all_starts(graph.num_nodes, 2))
    for return_paths in (False, True):
        args = (*walk_adjacency(graph), starts, 3, 7, 1, 0, MODES["exact"], 2, return_paths)
        torch.library.opcheck(_sample_nhop_op, args)


def test_int32_starts_are_accepted():
    graph, _ = GRAPHS["undirected"]()
    starts = torch.tensor(all_starts(graph.num_nodes, 3))
    end = sample_nhop(graph, starts.int(), 2, seed=3)
    assert end.dtype == torch.int64 and torch.equal(end, sample_nhop(graph, starts, 2, seed=3))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"starts": torch.tensor([0, 12])}, "not a node id"),
        ({"starts": torch.tensor([-1])}, "not a node id"),
        ({"starts": torch.tensor([0.0])}, "int64 or int32"),
        ({"starts": torch.tensor([[0]])}, "shape"),
        ({"starts": [0, 1]}, "torch.Tensor"),
        ({"hops": 0}, "hops"),
        ({"hops": 33}, "hops"),
        ({"hops": 5, "mode": "exact"}, "hops"),
        ({"hops": 2.0}, "hops must be an int"),
        ({"max_retries": -1}, "max_retries"),
        ({"mode": "bfs"}, "mode"),
        ({"seed": -1}, "seed"),
        ({"seed": 2**64}, "seed"),
        ({"walk_offset": -3}, "walk_offset"),
        ({"graph": "not a graph"}, "galfast.Graph"),
    ],
)
def test_bad_input_raises_value_error(kwargs, match):
    graph, _ = make_graph([(0, 1), (1, 2)], 12, symmetrize=True)
    args = {"graph": graph, "starts": torch.tensor([0, 1]), "hops": 2, "seed": 0}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        sample_nhop(args.pop("graph"), args.pop("starts"), args.pop("hops"), **args)


def test_native_launcher_rejects_out_of_range_starts():
    graph, _ = make_graph([(0, 1)], 2)
    starts, end = torch.tensor([0, 2]), torch.empty(2, dtype=torch.long)
    p = _C.SampleNhopParams()
    adj = walk_adjacency(graph)
    p.out_ptr, p.out_nbr, p.in_ptr, p.in_nbr = (t.data_ptr() for t in adj)
    p.starts, p.end, p.num_nodes, p.num_walks = starts.data_ptr(), end.data_ptr(), 2, 2
    p.index_type = _C.IndexType(0)
    with pytest.raises(ValueError, match="start 2 of walk 1"):
        _C.sample_nhop_cpu(p)
    p.starts, p.hops = torch.tensor([0, 1]).data_ptr(), 0
    with pytest.raises(ValueError, match="hops"):
        _C.sample_nhop_cpu(p)


# ---------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("hops", [1, 2, 3, 4])
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("name", list(GRAPHS))
def test_cuda_matches_cpu(name, mode, hops):
    graph, _ = GRAPHS[name]()
    starts = torch.tensor(all_starts(graph.num_nodes, 30))
    cpu = sample_nhop(graph, starts, hops, seed=SEED, mode=mode, return_paths=True, walk_offset=5)
    cuda = sample_nhop(
        graph.to("cuda"),
        starts.cuda(),
        hops,
        seed=SEED,
        mode=mode,
        return_paths=True,
        walk_offset=5,
    )
    assert cuda[0].device.type == "cuda"
    assert torch.equal(cuda[0].cpu(), cpu[0]) and torch.equal(cuda[1].cpu(), cpu[1])


@pytest.mark.cuda
def test_cuda_awkward_graphs_and_bad_input():
    graph, _ = make_graph([(0, 0), (0, 1)], 4)
    cuda = graph.to("cuda")
    starts = torch.tensor([0, 1, 2, 3, 0], device="cuda")
    for mode in MODES:
        expected = sample_nhop(graph, starts.cpu(), 2, seed=9, mode=mode, return_paths=True)
        got = sample_nhop(cuda, starts, 2, seed=9, mode=mode, return_paths=True)
        assert torch.equal(got[0].cpu(), expected[0]) and torch.equal(got[1].cpu(), expected[1])
    empty = sample_nhop(cuda, starts[:0], 2, seed=9)
    assert empty.shape == (0,) and empty.device.type == "cuda"
    with pytest.raises(ValueError, match="not a node id"):
        sample_nhop(cuda, torch.tensor([4], device="cuda"), 1, seed=0)
    with pytest.raises(ValueError, match="is on"):
        sample_nhop(cuda, starts.cpu(), 1, seed=0)


@pytest.mark.parametrize("mode", ["paper", "simple", "exact"])
def test_graph_without_edges_fails_every_walk(mode):
    # was "ValueError: sample_nhop: pointers not set" from the glue (empty adjacency tensors)
    graph = Graph.from_edge_index(torch.zeros(2, 0, dtype=torch.long), 3)
    end, paths = sample_nhop(
        graph, torch.tensor([2, 0], dtype=torch.int32), 2, seed=0, mode=mode, return_paths=True
    )
    assert end.tolist() == [-1, -1] and end.dtype == torch.int64
    assert paths.tolist() == [[2, -1, -1], [0, -1, -1]] and paths.dtype == torch.int64
    assert sample_nhop(graph, torch.tensor([1]), 1, seed=0, mode=mode).tolist() == [-1]
