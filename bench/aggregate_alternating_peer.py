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
import warnings

import conftest  # noqa: F401  (pins the heap)
import torch
from graphs import pubmed_like

from galfast import Graph
from galfast.ops import aggregate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--features", type=int, default=16)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(1)
    edge_index, n = pubmed_like()
    g = Graph.from_edge_index(edge_index, n)
    scale = g.degree_scale("gcn", torch.float32)
    weight = scale[g.row] * scale[g.col]
    with warnings.catch_warnings():  # torch calls its sparse CSR support beta
        warnings.simplefilter("ignore", UserWarning)
        adj = torch.sparse_csr_tensor(g.rowptr.int(), g.col.int(), weight, (n, n))
        adj_t = adj.t().to_sparse_csr()

    class CachedTransposeSpmm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return torch.sparse.mm(adj, x)

        @staticmethod
        def backward(ctx, grad):
            return torch.sparse.mm(adj_t, grad)

    x = torch.randn(n, args.features, requires_grad=True)
    impls = {
        "galfast": lambda: aggregate(g, x, norm="gcn"),
        "torch.sparse.mm_int32_cachedT": lambda: CachedTransposeSpmm.apply(x),
    }
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
