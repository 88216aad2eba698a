"""Walks per second of galfast.ops.sample_nhop (GAL's n-hop sampler) against its peers, on the
MovieLens-1M-sized bipartite graph of bench/graphs.py (9,746 nodes, ~2.0M directed edges).

    pytest bench/bench_sample_nhop.py --benchmark-only --benchmark-json=walk.json
    python bench/walks_table.py walk.json        # walks/s and ratios as a markdown table
    PYTHONPATH=. python bench/bench_sample_nhop.py 15   # 1M starts, implementations taking turns
    PYTHONPATH=. python bench/bench_sample_nhop.py 7 2  # the same on two threads (wall clock)
    PYTHONPATH=. python bench/bench_sample_nhop.py 7 1 avx2  # galfast's AVX2 walks (or baseline)

Groups: ``nhop-<starts>-hops<n>`` puts galfast (CPU, its AVX2 and baseline walks as a CPU
without AVX-512 runs them, and CUDA when a GPU is present), the three
numba peers of bench/nhop_baselines.py ("numba-splitmix", the fastest we could write, with
prefetched reads; "numba-splitmix-gather", the same walks with each hop's reads in a gather loop
of their own, the earlier peer and sometimes the faster one at 1 hop; and "numba", a plain loop
on numba's Mersenne Twister), the original networkx loop, and at 1 hop "reads-only" (no
sampler: the random reads and output stream of a 1-hop batch alone, a floor) side by side for
one start set ("users": each of the 6,040 users once; "1M": 1,000,000 starts drawn among the
users) and one hop count;
``nhop-exact-hops<n>`` compares exact with paper mode. The networkx loop runs on the first
2,000 users only (it would take minutes on 1M starts): every benchmark records its number of
walks in ``extra_info["walks"]``, so compare walks per second, not times. The peers of a
group run back to back, ROUNDS rounds each; on a shared machine the best round is the
least disturbed one. The numba peers and the floor read galfast's own CPU arrays (`peer_csr`):
int32 row offsets and, on graphs of at most 2^16 nodes, 16-bit neighbour ids.
"""

from __future__ import annotations

import random
import sys
import time

import numpy as np
import pytest
import torch
from graphs import movielens_like
from nhop_baselines import (
    networkx_nhop,
    numba_nhop,
    numba_splitmix_gather_nhop,
    numba_splitmix_nhop,
    one_hop_slots,
    reads_only,
)

from galfast import Graph
from galfast.ops import sample_nhop
from galfast.ops.sample_nhop import walk_adjacency

NUM_USERS = 6040
NETWORKX_STARTS = 2000
HOPS = [1, 2, 3, 4]
ROUNDS = 7


@pytest.fixture(scope="module")
def graph():
    edge_index, num_nodes = movielens_like()
    g = Graph.from_edge_index(edge_index, num_nodes)
    walk_adjacency(g)  # built once and cached on the graph, as in training
    return g


@pytest.fixture(scope="module")
def starts():
    users = torch.arange(NUM_USERS)
    many = torch.randint(0, NUM_USERS, (1_000_000,), generator=torch.Generator().manual_seed(0))
    return {"users": users, "1M": many}


def peer_csr(graph):
    """(row offsets, neighbour ids) for the numba peers: galfast's own CPU arrays, as NumPy
    views (int32 offsets, and the 16-bit copy of the ids where galfast's walks read one: at most
    2^16 nodes, galfast.ops.sample_nhop.walk_neighbours16). The peers and galfast then read the
    same memory, so neither finds the other's arrays in the caches when the two take turns
    (with copies, each call began by evicting the other's; docs/benchmarks.md, session 15).
    Builds from before the 16-bit copy get a copy made here by the same rule."""
    out_ptr, out_nbr, _, _ = walk_adjacency(graph)
    if graph.num_nodes > 2**16:
        return out_ptr.numpy(), out_nbr.numpy()
    try:
        from galfast.ops.sample_nhop import walk_neighbours16
    except ImportError:
        return out_ptr.numpy(), out_nbr.numpy().astype(np.uint16)
    return out_ptr.numpy(), walk_neighbours16(graph).numpy()


def run(benchmark, group, name, walks, fn):
    benchmark.group = group
    benchmark.name = name
    benchmark.extra_info["walks"] = walks
    benchmark.pedantic(fn, rounds=ROUNDS, warmup_rounds=1)


@pytest.fixture(scope="module")
def cuda_graph(graph):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    g = graph.to("cuda")
    walk_adjacency(g)
    return g


@pytest.fixture(scope="module")
def numba_csr(graph):
    pytest.importorskip("numba")
    ptr, nbr = peer_csr(graph)
    numba_nhop(ptr, nbr, np.zeros(1, dtype=np.int64), 1)  # compile outside the timings
    numba_splitmix_nhop(ptr, nbr, np.zeros(1, dtype=np.int64), 1)
    numba_splitmix_gather_nhop(ptr, nbr, np.zeros(1, dtype=np.int64), 1)
    return ptr, nbr


@pytest.fixture(scope="module")
def networkx_graph(graph):
    nx = pytest.importorskip("networkx")
    g = nx.Graph()
    g.add_nodes_from(range(graph.num_nodes))
    g.add_edges_from(graph.edge_index().t().tolist())
    return g


def walker(request, graph, starts, implementation, hops):
    """(number of walks, a function running them) for one peer."""
    if implementation == "galfast-cpu":
        return starts.numel(), lambda: sample_nhop(graph, starts, hops, seed=1)
    if implementation in ("galfast-cpu-avx2", "galfast-cpu-baseline"):
        from galfast._native import _C

        isa = implementation.rsplit("-", 1)[1]

        def narrower():
            before = _C.set_sample_nhop_isa(isa)
            try:
                sample_nhop(graph, starts, hops, seed=1)
            finally:
                _C.set_sample_nhop_isa(before)

        return starts.numel(), narrower
    if implementation == "galfast-cuda":
        g, s = request.getfixturevalue("cuda_graph"), starts.cuda()

        def walk():
            sample_nhop(g, s, hops, seed=1)
            torch.cuda.synchronize()

        return s.numel(), walk
    if implementation == "numba":
        csr, s = request.getfixturevalue("numba_csr"), starts.numpy()
        return s.size, lambda: numba_nhop(*csr, s, hops)
    if implementation == "numba-splitmix":
        csr, s = request.getfixturevalue("numba_csr"), starts.numpy()
        return s.size, lambda: numba_splitmix_nhop(*csr, s, hops)
    if implementation == "reads-only":
        if hops != 1:
            pytest.skip("the floor of 1-hop walks only")
        (ptr, nbr), s = request.getfixturevalue("numba_csr"), starts.numpy()
        slots = one_hop_slots(ptr, s)
        reads_only(nbr, slots[:1])  # compile outside the timings
        return s.size, lambda: reads_only(nbr, slots)
    if implementation == "numba-splitmix-gather":
        csr, s = request.getfixturevalue("numba_csr"), starts.numpy()
        return s.size, lambda: numba_splitmix_gather_nhop(*csr, s, hops)
    if starts.numel() > NUM_USERS:
        pytest.skip("the networkx loop would take minutes on 1M starts")
    nx_graph, s, rng = (
        request.getfixturevalue("networkx_graph"),
        list(range(NETWORKX_STARTS)),
        random.Random(0),
    )
    return len(s), lambda: networkx_nhop(nx_graph, s, hops, rng)


# The implementation varies fastest, so the peers of a group run back to back.
@pytest.mark.parametrize(
    "implementation",
    [
        "galfast-cpu",
        "galfast-cpu-avx2",
        "galfast-cpu-baseline",
        "galfast-cuda",
        "numba-splitmix",
        "numba-splitmix-gather",
        "numba",
        "networkx-loop",
        "reads-only",
    ],
)
@pytest.mark.parametrize("hops", HOPS)
@pytest.mark.parametrize("start_set", ["users", "1M"])
def test_nhop(benchmark, request, graph, starts, start_set, hops, implementation):
    walks, fn = walker(request, graph, starts[start_set], implementation, hops)
    if implementation == "networkx-loop":
        implementation += f"[{walks} starts]"
    run(benchmark, f"nhop-{start_set}-hops{hops}", implementation, walks, fn)


@pytest.mark.parametrize("mode", ["paper", "exact"])
@pytest.mark.parametrize("hops", HOPS)
def test_exact_vs_paper(benchmark, graph, starts, hops, mode):
    s = starts["users"]
    run(
        benchmark,
        f"nhop-exact-hops{hops}",
        f"galfast-cpu-{mode}",
        s.numel(),
        lambda: sample_nhop(graph, s, hops, seed=1, mode=mode),
    )


def interleaved(hops_list, rounds: int, threads: int = 1, isa: str = "avx512") -> None:
    """Prints walks/s (best round) of galfast and the splitmix peers on the 1M starts, the
    implementations taking turns within every round, in an order that rotates from round to
    round, so a burst of load on a shared machine hits them alike (pytest-benchmark runs one
    implementation's rounds back to back). One thread is timed in CPU time (a loaded machine
    inflates every column alike); several, in wall-clock time, galfast and numba with the same
    thread count. `isa` names the widest walks galfast may take ("avx512", "avx2" or
    "baseline"), so one machine times the walks of CPUs with fewer instructions."""
    from galfast._native import _C

    _C.set_sample_nhop_isa(isa)
    torch.set_num_threads(threads)
    if threads > 1:
        import numba

        numba.set_num_threads(threads)
    clock = time.process_time if threads == 1 else time.perf_counter
    edge_index, num_nodes = movielens_like()
    g = Graph.from_edge_index(edge_index, num_nodes)
    ptr, nbr = peer_csr(g)
    many = torch.randint(0, NUM_USERS, (1_000_000,), generator=torch.Generator().manual_seed(0))
    s = many.numpy()
    slots = one_hop_slots(ptr, s)
    for hops in hops_list:
        runs = {
            "galfast-cpu": lambda hops=hops: sample_nhop(g, many, hops, seed=1),
            "numba-splitmix": lambda hops=hops: numba_splitmix_nhop(ptr, nbr, s, hops),
            "numba-splitmix-gather": lambda hops=hops: numba_splitmix_gather_nhop(
                ptr, nbr, s, hops
            ),
        }
        if hops == 1:
            runs["reads-only"] = lambda: reads_only(nbr, slots)
        best = dict.fromkeys(runs, float("inf"))
        names = list(runs)
        for r in range(rounds + 1):
            # the order rotates: a call finds the caches as its predecessor left them, and with
            # a fixed order galfast always followed the gather peer, whose plain reads of the
            # starts fill L2 and L3 (docs/benchmarks.md, session 15)
            for name in names[r % len(names) :] + names[: r % len(names)]:
                start = clock()
                runs[name]()
                if r > 0:  # round 0 warms up (and compiles)
                    best[name] = min(best[name], clock() - start)
        ours = best["galfast-cpu"]
        ratios = ", ".join(
            f"{name} {s.size / t / 1e6:.1f}M (galfast {t / ours:.2f}x)" for name, t in best.items()
        )
        print(f"hops {hops}: {ratios}", flush=True)


if __name__ == "__main__":
    # OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 PYTHONPATH=. python bench/bench_sample_nhop.py [ROUNDS]
    # PYTHONPATH=. python bench/bench_sample_nhop.py ROUNDS THREADS    (several threads)
    # ... bench/bench_sample_nhop.py ROUNDS THREADS avx2|baseline   (galfast's narrower walks)
    interleaved(
        HOPS,
        int(sys.argv[1]) if len(sys.argv) > 1 else 15,
        int(sys.argv[2]) if len(sys.argv) > 2 else 1,
        sys.argv[3] if len(sys.argv) > 3 else "avx512",
    )
