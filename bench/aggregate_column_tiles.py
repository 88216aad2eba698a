"""The CPU sum over column tiles against the row-by-row kernel and torch.sparse.mm, in one
process (issue 19): GCN normalisation, one thread, minimum CPU time over --rounds rounds of 2
calls that alternate the three sides.

    OMP_NUM_THREADS=1 python bench/aggregate_column_tiles.py --graph movielens --features 4 20
    OMP_NUM_THREADS=1 python bench/aggregate_column_tiles.py --backward --tile-bytes 32768

The row-by-row side turns tiles off (``_MIN_EDGES_PER_TILE`` = inf); the tiled side forces them
on (``_MIN_EDGES_PER_TILE`` = 0) with tiles of --tile-bytes of x.
"""

from __future__ import annotations

import argparse
import importlib
import time

import torch
from aggregate_widths import bench_graph, sparse_csr

from galfast.ops import aggregate

ops_aggregate = importlib.import_module("galfast.ops.aggregate")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features", type=int, nargs="+", default=[4, 16, 20, 32, 64])
    parser.add_argument("--graph", choices=["random", "movielens"], default="movielens")
    parser.add_argument("--nodes", type=int, default=9746, help="random graph only")
    parser.add_argument("--edges", type=int, default=1_800_000, help="random graph only")
    parser.add_argument("--tile-bytes", type=int, default=32 * 1024)
    parser.add_argument("--backward", action="store_true", help="time forward + backward")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    graph = bench_graph(args, gen)
    n = graph.num_nodes
    scale = graph.degree_scale("gcn", torch.float32)
    values = scale[graph.row] * scale[graph.col]
    adj = sparse_csr(graph.rowptr, graph.col, values, n)
    colptr, csc_row, csc_edge_id = graph.csc
    adj_t = sparse_csr(colptr, csc_row, values[csc_edge_id], n)
    what = "forward + backward" if args.backward else "forward"
    print(f"{args.graph}: {n} nodes, {graph.num_edges} edges; {what}; ms per call")
    print("| F | row by row | column tiles | torch.sparse.mm | tiles vs rows |")
    print("|---|---|---|---|---|")
    for f in args.features:
        x = torch.randn(n, f, generator=gen, requires_grad=args.backward)
        grad = torch.randn(n, f, generator=gen)

        def ours(x=x, grad=grad):
            out = aggregate(graph, x, norm="gcn")
            if args.backward:
                torch.autograd.grad(out, x, grad)

        def peer(x=x, grad=grad):
            with torch.no_grad():
                torch.sparse.mm(adj, x)
                if args.backward:
                    torch.sparse.mm(adj_t, grad)

        sides = [(ours, float("inf")), (ours, 0.0), (peer, None)]
        best = [float("inf")] * 3
        for round_ in range(args.rounds + 1):
            for k, (fn, min_edges) in enumerate(sides):
                ops_aggregate._TILE_BYTES = args.tile_bytes
                if min_edges is not None:
                    ops_aggregate._MIN_EDGES_PER_TILE = min_edges
                start = time.process_time()
                fn()
                fn()
                if round_ > 0:  # the first round builds the caches
                    best[k] = min(best[k], (time.process_time() - start) / 2 * 1e3)
        rows, tiles, torch_ms = best
        print(f"| {f} | {rows:.2f} | {tiles:.2f} | {torch_ms:.2f} | {rows / tiles:.2f}x |")


if __name__ == "__main__":
    main()
