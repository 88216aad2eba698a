"""The CPU aggregation's cost per edge at each feature width, against torch.sparse.mm:

    python bench/aggregate_widths.py --features 8 12 16 20 24 32

A Cora-size node set (2,708 nodes, so x stays in cache and the kernel's arithmetic shows)
with about 935k random edges, GCN normalisation, one thread, the minimum CPU time over 5
rounds (CPU time, so that a loaded machine inflates both columns alike).
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch

from galfast import Graph
from galfast.ops import aggregate


def per_call(fn, calls: int = 10) -> float:
    fn()
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.process_time() - start) / calls)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features", type=int, nargs="+", default=[8, 12, 16, 20, 24, 32])
    parser.add_argument("--nodes", type=int, default=2708)
    parser.add_argument("--edges", type=int, default=1_000_000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    n = args.nodes
    graph = Graph.from_edge_index(torch.randint(0, n, (2, args.edges), generator=gen), n)
    scale = graph.degree_scale("gcn", torch.float32)
    with warnings.catch_warnings():  # torch calls its sparse CSR support beta
        warnings.simplefilter("ignore")
        adj = torch.sparse_csr_tensor(
            graph.rowptr, graph.col, scale[graph.row] * scale[graph.col], (n, n)
        )
    edges = graph.num_edges
    print(f"{n} nodes, {edges} edges; ns per edge")
    print("| F | galfast | torch.sparse.mm | ratio |")
    print("|---|---|---|---|")
    for f in args.features:
        x = torch.randn(n, f, generator=gen)
        ours = per_call(lambda x=x: aggregate(graph, x, norm="gcn")) / edges * 1e9
        peer = per_call(lambda x=x: torch.sparse.mm(adj, x)) / edges * 1e9
        print(f"| {f} | {ours:.2f} | {peer:.2f} | {ours / peer:.2f}x |")


if __name__ == "__main__":
    main()
