"""n-hop walks on a graph whose int32 ids miss every cache: 400,000 nodes, 12 random edges
each way (about 4.8M directed edges, 19 MB of ids, too many nodes for the 16-bit copy), 1M
uniform starts, one thread. galfast's AVX-512, AVX2 and baseline walks (galfast._C.
set_sample_nhop_isa) and the numba splitmix peer take turns in one process, in an order that
rotates every round; walks/s of the best round (CPU time) and the ratio to the peer:

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 PYTHONPATH=. python bench/nhop_large_graph.py [ROUNDS]

A build or CPU without a walk's instructions runs the next narrower one in its place.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch
from bench_sample_nhop import peer_csr
from nhop_baselines import numba_splitmix_nhop

from galfast import Graph
from galfast._native import _C
from galfast.ops import sample_nhop

NUM_NODES = 400_000
EDGES_PER_NODE = 12
NUM_STARTS = 1_000_000


def main(rounds: int) -> None:
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    src = rng.integers(0, NUM_NODES, NUM_NODES * EDGES_PER_NODE // 2)
    dst = rng.integers(0, NUM_NODES, src.size)
    edges = torch.from_numpy(np.stack([src, dst]))
    g = Graph.from_edge_index(edges, NUM_NODES, symmetrize=True)
    ptr, nbr = peer_csr(g)
    starts = torch.from_numpy(rng.integers(0, NUM_NODES, NUM_STARTS))
    numba_splitmix_nhop(ptr, nbr, starts.numpy()[:10], 1)  # compile outside the timings

    def galfast(isa: str, hops: int):
        def walk():
            _C.set_sample_nhop_isa(isa)
            sample_nhop(g, starts, hops, seed=1)

        return walk

    before = _C.set_sample_nhop_isa("avx512")
    try:
        for hops in (1, 2, 3):
            runs = {isa: galfast(isa, hops) for isa in ("avx512", "avx2", "baseline")}
            runs["numba-splitmix"] = lambda hops=hops: numba_splitmix_nhop(
                ptr, nbr, starts.numpy(), hops
            )
            best = dict.fromkeys(runs, float("inf"))
            names = list(runs)
            for r in range(rounds + 1):
                for name in names[r % len(names) :] + names[: r % len(names)]:
                    start = time.process_time()
                    runs[name]()
                    if r > 0:  # round 0 warms up
                        best[name] = min(best[name], time.process_time() - start)
            peer = best["numba-splitmix"]
            cells = ", ".join(
                f"{name} {NUM_STARTS / t / 1e6:.1f}M ({peer / t:.2f}x)" for name, t in best.items()
            )
            print(f"hops {hops}: {cells}", flush=True)
    finally:
        _C.set_sample_nhop_isa(before)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
