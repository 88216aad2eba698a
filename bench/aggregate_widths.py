"""The CPU aggregation's cost per edge at each feature width, against torch.sparse.mm:

    python bench/aggregate_widths.py --features 8 12 16 20 24 32
    python bench/aggregate_widths.py --graph movielens --backward --features 1 4 16 20 64

GCN normalisation, one thread, the minimum CPU time over --rounds rounds of 3 calls that
alternate the two sides (CPU time, so that a loaded machine inflates both columns alike).
Graphs: ``random`` (default: a Cora-size node set of 2,708 nodes, so x stays in cache and the
kernel's arithmetic shows, with about 935k random edges; --nodes and --edges change it) or
``movielens`` (the bundled synthetic-movielens-1m graph, users and movies in both directions:
the graph of the GAL MovieLens run).

With --backward both columns time forward and backward for x. The peer is written as well as
torch allows: its backward is a second torch.sparse.mm with the transposed matrix built once
beforehand, rather than autograd's, which transposes the sparse matrix on every call.
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch

from galfast import Graph
from galfast.ops import aggregate


def per_call(fns, rounds: int, calls: int = 3) -> list[float]:
    """Seconds of CPU time per call of each of `fns`: the minimum over `rounds` rounds, each
    timing every function in turn (so load that comes and goes reaches all of them)."""
    for fn in fns:
        fn()
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            start = time.process_time()
            for _ in range(calls):
                fn()
            best[k] = min(best[k], (time.process_time() - start) / calls)
    return best


def bench_graph(args: argparse.Namespace, gen: torch.Generator) -> Graph:
    if args.graph == "movielens":
        from galfast.datasets import synthetic_movielens_1m

        return synthetic_movielens_1m(seed=0).graph
    n = args.nodes
    return Graph.from_edge_index(torch.randint(0, n, (2, args.edges), generator=gen), n)


def sparse_csr(rowptr, col, values, n):
    with warnings.catch_warnings():  # torch calls its sparse CSR support beta
        warnings.simplefilter("ignore")
        return torch.sparse_csr_tensor(rowptr, col, values, (n, n))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features", type=int, nargs="+", default=[8, 12, 16, 20, 24, 32])
    parser.add_argument("--graph", choices=["random", "movielens"], default="random")
    parser.add_argument("--nodes", type=int, default=2708, help="random graph only")
    parser.add_argument("--edges", type=int, default=1_000_000, help="random graph only")
    parser.add_argument("--backward", action="store_true", help="time forward + backward")
    parser.add_argument("--rounds", type=int, default=15)
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
    edges = graph.num_edges
    what = "forward + backward" if args.backward else "forward"
    print(f"{args.graph} graph: {n} nodes, {edges} edges; {what}, ns per edge")
    print("| F | galfast | torch.sparse.mm | ratio |")
    print("|---|---|---|---|")
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

        ours_ns, peer_ns = (t / edges * 1e9 for t in per_call([ours, peer], args.rounds))
        print(f"| {f} | {ours_ns:.2f} | {peer_ns:.2f} | {ours_ns / peer_ns:.2f}x |")


if __name__ == "__main__":
    main()
