"""Sampled edges per second of galfast.ops.sample_neighbors against its peers: 2-layer fan-out
15/10, batches of 1,024 seeds, on a seeded synthetic power-law graph of about 11M edges.

    python bench/bench_sample_neighbors.py [--batches 40] [--rounds 3] [--threads 2]
        [--torch-sparse-lib PATH]

Peers, each sampling the same seed batches (every node once, shuffled with a fixed seed):
  - ``torch`` : the best plain-PyTorch sampler we could write (exact uniform without
    replacement: one random key per candidate edge of the rows above the fan-out, a sort by
    (row, key), the first k per row; relabelling by torch.unique). It is what is left when
    neither pyg-lib nor torch-sparse is installed: PyG 2.8.1's NeighborSampler then raises
    ImportError ("requires either 'pyg-lib' or 'torch-sparse'").
  - ``torch_sparse`` (with ``--torch-sparse-lib``): torch-sparse's C++ ``neighbor_sample``,
    the sampler PyG's NeighborLoader calls without pyg-lib, called directly (sampler only).
  - ``pyg_loader`` (same option): PyG's NeighborLoader on that backend, the full loader path
    a PyG user runs (sampling, then the subgraph ``Data`` it builds).
Each peer runs ``--rounds`` rounds back to back; the best round (least disturbed on a shared
machine) is reported, in wall time and in process CPU time (all threads together; on a loaded
machine the wall time also counts waiting for a core). Speed-ups compare time per sampled edge;
sampled edges are the edges of all blocks (layer 1 + layer 2). ``--torch-batches`` limits the
plain-PyTorch peer, whose rows above the fan-out cost their whole degree, to fewer batches.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from galfast import Graph
from galfast.ops import sample_neighbors

FANOUTS = [15, 10]
BATCH = 1024


def power_law_graph(num_nodes: int, num_edges: int, seed: int) -> tuple[torch.Tensor, int]:
    """Directed edges whose targets follow a Zipf-like law (in-degree of the node of rank r
    about r^-0.8, so a few hubs have tens of thousands of in-edges) and whose sources are
    uniform; node ids are shuffled so hubs are scattered. Duplicates are merged by the Graph."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, num_nodes + 1) ** 0.8
    cdf = np.cumsum(weights / weights.sum())
    rank = np.minimum(np.searchsorted(cdf, rng.random(num_edges)), num_nodes - 1)
    dst = rng.permutation(num_nodes)[rank]
    src = rng.integers(0, num_nodes, num_edges)
    return torch.from_numpy(np.stack([src, dst])), num_nodes


def torch_sampler(rowptr: torch.Tensor, col: torch.Tensor, seeds: torch.Tensor, gen) -> int:
    """The plain-PyTorch peer; returns the number of sampled edges."""
    dst, total = seeds, 0
    for k in FANOUTS:
        begin, degree = rowptr[dst], rowptr[dst + 1] - rowptr[dst]
        take = degree.clamp(max=k)
        # every candidate edge of every destination, with its row and a random key
        row = torch.repeat_interleave(torch.arange(dst.numel()), degree)
        offset = torch.arange(row.numel()) - torch.repeat_interleave(
            torch.cumsum(degree, 0) - degree, degree
        )
        key = torch.rand(row.numel(), generator=gen)
        key[degree[row] <= k] = 0  # rows within the fan-out keep every edge
        order = torch.argsort(row.double() * 2 + key)  # by (row, key)
        # rows stay contiguous and in order, so sorted position i is rank offset[i] of its row
        chosen = order[offset < take[row]]
        edge = begin[row[chosen]] + offset[chosen]
        src = col[edge]
        nodes, inverse = torch.unique(torch.cat([dst, src]), return_inverse=True)
        first = torch.full_like(nodes, inverse.numel()).scatter_reduce_(
            0, inverse, torch.arange(inverse.numel()), "amin"
        )
        dst = nodes[torch.argsort(first)]
        total += edge.numel()
    return total


def best_round(run, batches: list, rounds: int) -> tuple[float, float, int]:
    """(wall seconds of the best round, process CPU seconds of the best round, sampled edges
    per round). On a loaded machine the wall time includes waiting for a core; the CPU time
    (all threads together) does not."""
    wall, cpu, edges = float("inf"), float("inf"), 0
    for _ in range(rounds):
        start, start_cpu = time.perf_counter(), time.process_time()
        edges = sum(run(b, seeds) for b, seeds in enumerate(batches))
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return wall, cpu, edges


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--edges", type=int, default=11_000_000)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--torch-sparse-lib", default=None)
    parser.add_argument("--torch-batches", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    start = time.perf_counter()
    edge_index, num_nodes = power_law_graph(args.nodes, args.edges, seed=0)
    graph = Graph.from_edge_index(edge_index, num_nodes)
    degree = graph.in_degree
    print(
        f"graph: {num_nodes:,} nodes, {graph.num_edges:,} edges, max in-degree "
        f"{int(degree.max()):,}, built in {time.perf_counter() - start:.1f} s"
    )
    perm = torch.randperm(num_nodes, generator=torch.Generator().manual_seed(1))
    batches = [perm[b * BATCH : (b + 1) * BATCH] for b in range(args.batches)]
    rowptr, col = graph.rowptr, graph.col

    def galfast_run(b, seeds):
        return sum(
            block.num_edges for block in sample_neighbors(graph, seeds, FANOUTS, seed=0, batch=b)
        )

    gen = torch.Generator().manual_seed(2)
    peers = {"galfast": galfast_run, "torch": lambda b, s: torch_sampler(rowptr, col, s, gen)}
    if args.torch_sparse_lib:
        torch.ops.load_library(args.torch_sparse_lib)
        import torch_geometric.typing
        from torch_geometric.data import Data
        from torch_geometric.loader import NeighborLoader

        def sparse_run(b, seeds):
            out = torch.ops.torch_sparse.neighbor_sample(rowptr, col, seeds, FANOUTS, False, True)
            return out[1].numel()

        # PyG checks this flag (set when `import torch_sparse` succeeds) to pick the backend
        torch_geometric.typing.WITH_TORCH_SPARSE = True
        data = Data(edge_index=graph.edge_index(), num_nodes=num_nodes)
        loader = NeighborLoader(
            data, FANOUTS, batch_size=BATCH, input_nodes=torch.cat(batches), shuffle=False
        )

        def loader_round(b, seeds):  # the whole loader pass counted as batch 0
            return sum(out.edge_index.size(1) for out in loader) if b == 0 else 0

        peers["torch_sparse"] = sparse_run
        peers["pyg_loader"] = loader_round

    results = {
        name: best_round(
            run, batches[: args.torch_batches] if name == "torch" else batches, args.rounds
        )
        for name, run in peers.items()
    }
    print(f"\n{args.batches} batches of {BATCH} seeds, fan-out {FANOUTS}, {args.threads} threads\n")
    print(
        "| sampler | wall per batch | sampled edges/s (wall) | galfast speed-up (wall) "
        "| CPU per batch | galfast speed-up (CPU) |"
    )
    print("|---|---|---|---|---|---|")
    ours_wall, ours_cpu, ours_edges = results["galfast"]
    counts = {
        name: min(args.torch_batches, args.batches) if name == "torch" else args.batches
        for name in results
    }
    for name, (wall, cpu, edges) in results.items():
        per_edge_wall, per_edge_cpu = wall / edges, cpu / edges
        print(
            f"| {name} | {wall / counts[name] * 1e3:.2f} ms | {edges / wall / 1e6:.2f} M | "
            f"{per_edge_wall / (ours_wall / ours_edges):.2f}x | "
            f"{cpu / counts[name] * 1e3:.2f} ms | {per_edge_cpu / (ours_cpu / ours_edges):.2f}x |"
        )


if __name__ == "__main__":
    main()
