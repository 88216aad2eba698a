"""The CPU sum's cost per edge by the cache level x lives in (issue 19): the same rows and
degree, gathering from more and more source nodes, so x grows from L1 size to L2 size:

    OMP_NUM_THREADS=1 python bench/aggregate_x_residency.py --features 20 --cols 320 800 3706 6040

Each graph has --rows rows of --degree distinct random sources (sorted, as a Graph holds them)
out of --cols source nodes (a bipartite Graph), mean aggregation (row_scale only), one thread,
the minimum CPU time over --rounds rounds of 2 calls, each round timing every graph in turn.
What tiling the columns so that x's rows come from L1 could save at most is the gap between the
first rows (x in L1) and the graph's own x size.
"""

from __future__ import annotations

import argparse
import time

import torch

from galfast import Graph
from galfast.ops import aggregate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features", type=int, nargs="+", default=[20])
    parser.add_argument("--cols", type=int, nargs="+", default=[320, 800, 1600, 3706, 6040])
    parser.add_argument("--rows", type=int, default=9746)
    parser.add_argument("--degree", type=int, default=160)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    cases = []  # (F, cols, graph, x)
    for f in args.features:
        for cols in args.cols:
            degree = min(args.degree, cols)
            picks = [torch.randperm(cols, generator=gen)[:degree] for _ in range(args.rows)]
            col = torch.stack(picks).sort(1).values.flatten()
            rowptr = torch.arange(args.rows + 1) * degree
            graph = Graph(rowptr, col, args.rows, num_src_nodes=cols)
            cases.append((f, cols, graph, torch.randn(cols, f, generator=gen)))
    # Every round times every case in turn, so load that comes and goes reaches them all.
    best = [float("inf")] * len(cases)
    for round_ in range(args.rounds + 1):
        for k, (_, _, graph, x) in enumerate(cases):
            start = time.process_time()
            aggregate(graph, x, reduce="mean")
            aggregate(graph, x, reduce="mean")
            if round_ > 0:  # the first round builds the caches
                best[k] = min(best[k], (time.process_time() - start) / 2)
    print("| F | source nodes | x (KiB) | edges | ns per edge |")
    print("|---|---|---|---|---|")
    for (f, cols, graph, x), seconds in zip(cases, best):
        kib = cols * f * x.element_size() / 1024
        ns = seconds / graph.num_edges * 1e9
        print(f"| {f} | {cols} | {kib:.0f} | {graph.num_edges} | {ns:.2f} |")


if __name__ == "__main__":
    main()
