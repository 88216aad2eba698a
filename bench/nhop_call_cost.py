"""The fixed cost of one sample_nhop call and a GAL training batch's walks, galfast against the
numba splitmix peers, one thread, in one process taking turns (best of 5 rounds of 2,000 calls,
wall clock):

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 PYTHONPATH=. python bench/nhop_call_cost.py

Batches: one start (the call's fixed cost alone), and each of the 6,040 users of the
MovieLens-size graph once, in order (a MovieLens-1M batch), at 1 and 2 hops.
"""

from __future__ import annotations

import sys
import time

import torch
from bench_sample_nhop import NUM_USERS, peer_csr
from graphs import movielens_like
from nhop_baselines import numba_splitmix_gather_nhop, numba_splitmix_nhop

from galfast import Graph
from galfast.ops import sample_nhop
from galfast.ops.sample_nhop import walk_adjacency


def main(rounds: int = 5, calls: int = 2000) -> None:
    torch.set_num_threads(1)
    edge_index, num_nodes = movielens_like()
    g = Graph.from_edge_index(edge_index, num_nodes)
    walk_adjacency(g)
    ptr, nbr = peer_csr(g)
    for count in (1, NUM_USERS):
        starts = torch.arange(count)
        s = starts.numpy()
        for hops in (1, 2):
            runs = {
                "galfast": lambda starts=starts, hops=hops: sample_nhop(g, starts, hops, seed=1),
                "numba-splitmix": lambda s=s, hops=hops: numba_splitmix_nhop(ptr, nbr, s, hops),
                "numba-splitmix-gather": lambda s=s, hops=hops: numba_splitmix_gather_nhop(
                    ptr, nbr, s, hops
                ),
            }
            best = dict.fromkeys(runs, float("inf"))
            for r in range(rounds + 1):
                for name, run in runs.items():
                    start = time.perf_counter()
                    for _ in range(calls):
                        run()
                    if r > 0:  # round 0 warms up (and compiles)
                        best[name] = min(best[name], (time.perf_counter() - start) / calls)
            cells = ", ".join(f"{name} {t * 1e6:.1f} us" for name, t in best.items())
            print(f"{count} starts, {hops} hops: {cells}", flush=True)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
