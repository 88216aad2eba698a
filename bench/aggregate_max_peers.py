"""Max aggregation, galfast against torch's own max reductions, the forward in one process:

    PYTHONPATH=. python bench/aggregate_max_peers.py --graph pubmed --features 16 --threads 1 2

Peers: ``torch.segment_reduce`` over the CSR (the gathered rows x[col] reduced per row) and
``scatter_reduce_(..., "amax")`` over the edge list, what PyG's max aggregation runs without
torch_scatter. galfast's max also records each maximum's edge for its backward. Best of 5
rounds of 20 calls, wall clock, the implementations taking turns; the heap is pinned as in the
benchmarks (bench/conftest.py).
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

sys.path.insert(0, "bench")
import conftest  # noqa: E402,F401  (pins the heap)
from bench_aggregate import features, setup  # noqa: E402

from galfast.ops import aggregate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", default="pubmed", choices=["cora", "pubmed", "movielens"])
    parser.add_argument("--features", type=int, default=16)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    g, _, _ = setup(args.graph, "cpu")
    x = features(g.num_nodes, args.features, "cpu", backward=False)
    index = g.row.view(-1, 1).expand(-1, args.features)

    def scatter_amax():
        out = x.new_zeros(g.num_nodes, args.features)
        return out.scatter_reduce_(0, index, x[g.col], "amax", include_self=False)

    impls = {
        "galfast": lambda: aggregate(g, x, reduce="max"),
        "segment_reduce": lambda: torch.segment_reduce(x[g.col], "max", offsets=g.rowptr),
        "scatter_reduce": scatter_amax,
    }
    expected = impls["galfast"]()
    for fn in impls.values():  # the same maxima (rows without edges: 0 in all three)
        torch.testing.assert_close(fn().nan_to_num(neginf=0.0), expected)
    for threads in args.threads:
        torch.set_num_threads(threads)
        best = dict.fromkeys(impls, float("inf"))
        for _ in range(5):
            for name, fn in impls.items():
                start = time.perf_counter()
                for _ in range(20):
                    fn()
                best[name] = min(best[name], (time.perf_counter() - start) / 20)
        cells = ", ".join(f"{name} {t * 1e6:,.0f} us" for name, t in best.items())
        print(f"{args.graph} F={args.features} {threads} thread(s): {cells}", flush=True)


if __name__ == "__main__":
    main()
