"""Same-run A/B of galfast builds on the bench's aggregation graphs, each beside the best-written
peer (int32 CSR ``torch.sparse.mm`` with its transpose built once, bench_aggregate.py's):

    python bench/ab_aggregate_peer.py /tmp/base . --graph pubmed --features 16 --threads 1 2
    python bench/ab_aggregate_peer.py /tmp/base . --graph cora --backward --avx2

Each argument is a checkout with an in-place build. The builds run alternately in fresh
processes (--repeats times each); a process times galfast's GCN aggregation and the peer in
turn, best of 7 rounds of 50 calls, wall clock, on each thread count. --avx2 turns the AVX-512
sum off (``_C.set_aggregate_simd``), so the AVX2 kernel runs. The heap is pinned as in the
benchmarks (bench/conftest.py).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

# Runs inside each build's checkout: prints one "threads impl microseconds" line per timing.
_MEASURE = """
import sys, time, torch
sys.path.insert(0, "bench")
import conftest  # noqa: F401  (pins the heap)
from bench_aggregate import IMPLS, features, setup
from galfast._native import _C
graph, features_, threads, backward, avx2 = {args!r}
if avx2:
    _C.set_aggregate_simd(False)
g, weight, adj = setup(graph, "cpu")
x = features(g.num_nodes, features_, "cpu", backward)
for t in threads:
    torch.set_num_threads(t)
    for name in ("galfast", "torch.sparse.mm_int32_cachedT"):
        fn = IMPLS[name]
        def step():
            out = fn(g, weight, adj, x)
            if backward:
                out.backward(torch.ones_like(out))
        for _ in range(5):
            step()
        best = float("inf")
        for _ in range(7):
            start = time.perf_counter()
            for _ in range(50):
                step()
            best = min(best, (time.perf_counter() - start) / 50)
        print(t, name, f"{{best * 1e6:.0f}}")
"""


LABELS = {"galfast": "galfast", "torch.sparse.mm_int32_cachedT": "peer"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("builds", nargs="+", help="checkouts with an in-place build")
    parser.add_argument("--graph", default="pubmed", choices=["cora", "pubmed", "movielens"])
    parser.add_argument("--features", type=int, default=16)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--backward", action="store_true", help="forward+backward for x")
    parser.add_argument("--avx2", action="store_true", help="the AVX2 kernel, not AVX-512")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    script = _MEASURE.format(
        args=(args.graph, args.features, args.threads, args.backward, args.avx2)
    )
    for _ in range(args.repeats):
        for build in args.builds:
            env = {**os.environ, "PYTHONPATH": os.path.abspath(build)}
            result = subprocess.run(
                [sys.executable, "-c", script],
                cwd=build,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            cells = [line.split() for line in result.stdout.split("\n") if line]
            row = " | ".join(f"{t}t {LABELS[name]} {us} us" for t, name, us in cells)
            print(f"{build}: {row}", flush=True)


if __name__ == "__main__":
    main()
