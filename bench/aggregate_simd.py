"""The CPU sum aggregation's AVX-512 kernel against its AVX2 kernel (the same build, switched
with _C.set_aggregate_simd) and torch.sparse.mm, in one process:

    OMP_NUM_THREADS=1 python bench/aggregate_simd.py --graph movielens --features 16 20 32 64 128
    OMP_NUM_THREADS=1 python bench/aggregate_simd.py --graph pubmed --backward
    python bench/aggregate_simd.py --graph movielens --threads 2 --wall

GCN normalisation (so the kernels read their pre-scaled copy of x, as in training), ns per
edge: the minimum over --rounds rounds of 3 calls, each round timing the three sides in turn
(so load that comes and goes reaches all of them). CPU time at --threads 1 by default; --wall
times wall clock instead, for several threads (meaningful only on a quiet machine). Graphs:
``movielens`` (the synthetic-movielens-1m graph of the GAL MovieLens run: 9,746 nodes, 1.8M
edges) or ``pubmed`` (bench/graphs.py's PubMed-size power-law graph: 19,717 nodes, 88.6k
edges). With --backward every side times forward and backward for x; the peer's backward is a
second torch.sparse.mm with the transposed matrix built once beforehand.
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch

from galfast import Graph
from galfast._native import _C
from galfast.ops import aggregate


def per_call(fns, rounds: int, clock, calls: int = 3) -> list[float]:
    """Seconds per call of each of `fns` by `clock`: the minimum over `rounds` rounds."""
    for fn in fns:
        fn()
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            start = clock()
            for _ in range(calls):
                fn()
            best[k] = min(best[k], (clock() - start) / calls)
    return best


def bench_graph(name: str) -> Graph:
    if name == "movielens":
        from galfast.datasets import synthetic_movielens_1m

        return synthetic_movielens_1m(seed=0).graph
    from graphs import pubmed_like

    edge_index, n = pubmed_like()
    return Graph.from_edge_index(edge_index, n)


def sparse_csr(rowptr, col, values, n):
    with warnings.catch_warnings():  # torch calls its sparse CSR support beta
        warnings.simplefilter("ignore")
        return torch.sparse_csr_tensor(rowptr, col, values, (n, n))


def with_simd(allowed: bool, fn):
    def run():
        before = _C.set_aggregate_simd(allowed)
        try:
            fn()
        finally:
            _C.set_aggregate_simd(before)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", choices=["movielens", "pubmed"], default="movielens")
    parser.add_argument("--features", type=int, nargs="+", default=[16, 20, 32, 64, 128])
    parser.add_argument("--backward", action="store_true", help="time forward + backward")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--wall", action="store_true", help="wall clock instead of CPU time")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    clock = time.perf_counter if args.wall else time.process_time
    gen = torch.Generator().manual_seed(0)
    graph = bench_graph(args.graph)
    n = graph.num_nodes
    scale = graph.degree_scale("gcn", torch.float32)
    values = scale[graph.row] * scale[graph.col]
    adj = sparse_csr(graph.rowptr, graph.col, values, n)
    colptr, csc_row, csc_edge_id = graph.csc
    adj_t = sparse_csr(colptr, csc_row, values[csc_edge_id], n)
    edges = graph.num_edges
    what = "forward + backward" if args.backward else "forward"
    unit = "wall" if args.wall else "CPU"
    print(f"{args.graph}: {n} nodes, {edges} edges; {what}, {args.threads} thread(s), {unit}")
    print("| F | AVX-512 | AVX2 | torch.sparse.mm | AVX-512 vs AVX2 | AVX-512 / torch |")
    print("|---|---|---|---|---|---|")
    for f in args.features:
        x = torch.randn(n, f, generator=gen)
        if args.backward:
            x.requires_grad_()
            grad = torch.randn(n, f, generator=gen)

            def ours(x=x, grad=grad):
                torch.autograd.grad(aggregate(graph, x, norm="gcn"), x, grad)

            def peer(x=x, grad=grad):
                with torch.no_grad():
                    torch.sparse.mm(adj, x), torch.sparse.mm(adj_t, grad)
        else:

            def ours(x=x):
                aggregate(graph, x, norm="gcn")

            def peer(x=x):
                torch.sparse.mm(adj, x)

        fns = [with_simd(True, ours), with_simd(False, ours), peer]
        wide, narrow, torch_ns = (t / edges * 1e9 for t in per_call(fns, args.rounds, clock))
        print(
            f"| {f} | {wide:.2f} | {narrow:.2f} | {torch_ns:.2f} | "
            f"{narrow / wide:.2f}x | {wide / torch_ns:.2f} |"
        )


if __name__ == "__main__":
    main()
