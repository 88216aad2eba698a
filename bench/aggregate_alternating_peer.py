"""galfast's GCN aggregation and the best-written torch peer (int32 CSR ``torch.sparse.mm`` with
its transpose built once) taking turns step by step in one process, so that each step finds the
caches as the other left them, the way two layers of a model do (pytest-benchmark runs each
implementation in a loop of its own, its data warm):

    OMP_NUM_THREADS=1 PYTHONPATH=. python bench/aggregate_alternating_peer.py --features 16

PubMed-size graph, one thread, glibc's heap pinned as in the benchmarks (bench/conftest.py);
prints each implementation's median forward, ones_like and backward time per step.
"""

from __future__ import annotations

import argparse
import statistics
import time

import conftest  # noqa: F401  (pins the heap)
import torch
from bench_aggregate import IMPLS, features, setup

PEERS = ("galfast", "torch.sparse.mm_int32_cachedT")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--features", type=int, default=16)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(1)
    g, weight, adj_t = setup("pubmed", "cpu")
    x = features(g.num_nodes, args.features, "cpu", backward=True)
    impls = {name: (lambda fn=IMPLS[name]: fn(g, weight, adj_t, x)) for name in PEERS}
    times = {name: {"fwd": [], "ones_like": [], "bwd": []} for name in impls}
    for step in range(args.steps):
        for name, forward in impls.items():
            t0 = time.perf_counter()
            out = forward()
            t1 = time.perf_counter()
            grad = torch.ones_like(out)
            t2 = time.perf_counter()
            out.backward(grad)
            t3 = time.perf_counter()
            if step >= 20:  # warm-up: caches of the graph, lazy imports
                for key, seconds in zip(times[name], (t1 - t0, t2 - t1, t3 - t2)):
                    times[name][key].append(seconds)
    for name, parts in times.items():
        cells = "  ".join(f"{k} {statistics.median(v) * 1e6:.0f} us" for k, v in parts.items())
        print(f"{name}: {cells}")


if __name__ == "__main__":
    main()
