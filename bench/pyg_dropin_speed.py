"""The PyG drop-in input forms, timed in one run (results in docs/benchmarks.md):

1. each galfast layer called with an ``edge_index`` (what a PyG script passes every step)
   against the same layer with a prebuilt ``galfast.Graph`` (the fast path): the cost of the
   cached edge_index look-up, which should stay within 10%;
2. bipartite SAGEConv and GATConv on a MovieLens-1M-size user -> movie graph, galfast vs PyG;
3. GATConv with edge features (``edge_dim``), galfast vs PyG.

    python bench/pyg_dropin_speed.py [--rounds 9] [--threads 1] [--only edge_features]
                                     [--clock cpu]

float32, forward + backward (with respect to x and every parameter), 64 channels (GAT: 4
heads of 16). Each round runs every variant of a row once, alternating, so load from other
processes hits them alike; the table shows the fastest round of each (on a machine shared
with other jobs, the minimum is the least disturbed estimate; one thread by default, since
OpenMP threads waiting on a descheduled sibling distort a loaded machine's timings most).
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Callable

import numpy as np
import torch
import torch_geometric.nn as pyg_nn
from graphs import cora_like, pubmed_like

import galfast
import galfast.nn as gnn
from galfast.nn._graph_input import layer_graph

CHANNELS = 64


def movielens_bipartite(seed: int = 0) -> tuple[torch.Tensor, int, int]:
    """User -> movie edges of a MovieLens-1M-size rating graph (6,040 users, 3,706 movies,
    1,000,209 ratings; Zipf-like movie popularity, heavy-tailed user activity)."""
    rng = np.random.default_rng(seed)
    users, movies, ratings = 6040, 3706, 1_000_209
    popularity = 1.0 / (np.arange(1, movies + 1) + 60.0) ** 1.1
    activity = 20 + rng.pareto(1.3, users)
    draws = int(ratings * 1.6)
    u = rng.choice(users, draws, p=activity / activity.sum())
    m = rng.choice(movies, draws, p=popularity / popularity.sum())
    keys = rng.permutation(np.unique(u.astype(np.int64) * movies + m))[:ratings]
    return torch.from_numpy(np.stack([keys // movies, keys % movies])), users, movies


# --clock cpu: the process's CPU time, which a heavily loaded machine inflates less than the
# wall clock (a descheduled step does not count); meaningful with one thread.
CLOCK = {"wall": time.perf_counter, "cpu": time.process_time}
_clock = CLOCK["wall"]


def time_round(step: Callable[[], None]) -> float:
    start = _clock()
    step()
    return _clock() - start


def fwd_bwd(module: torch.nn.Module, *args, **kwargs) -> Callable[[], None]:
    def step() -> None:
        module.zero_grad(set_to_none=True)
        out = module(*args, **kwargs)
        out.backward(torch.ones_like(out))

    return step


def compare(rows: list, name: str, variants: dict[str, Callable[[], None]], rounds: int) -> None:
    for step in variants.values():  # warm-up: caches, first-call allocations
        step()
    times = {key: [] for key in variants}
    for _ in range(rounds):
        for key, step in variants.items():
            times[key].append(time_round(step))
    fastest = {key: min(t) * 1e3 for key, t in times.items()}
    rows.append((name, fastest))
    cells = "  ".join(f"{key} {ms:8.2f} ms" for key, ms in fastest.items())
    print(f"{name:<34} {cells}", flush=True)


def homogeneous_layers() -> dict[str, Callable[[], torch.nn.Module]]:
    return {
        "GCNConv": lambda: gnn.GCNConv(CHANNELS, CHANNELS),
        "SAGEConv": lambda: gnn.SAGEConv(CHANNELS, CHANNELS),
        "GINConv": lambda: gnn.GINConv(torch.nn.Linear(CHANNELS, CHANNELS)),
        "ChebConv K=2": lambda: gnn.ChebConv(CHANNELS, CHANNELS, K=2),
        "GATConv h=4": lambda: gnn.GATConv(CHANNELS, CHANNELS // 4, heads=4),
    }


def edge_index_vs_graph(rows: list, rounds: int) -> None:
    for graph_name, make_graph in (("cora", cora_like), ("pubmed", pubmed_like)):
        edge_index, n = make_graph()
        graph = galfast.Graph.from_edge_index(edge_index, n)
        # The whole difference between the two paths: the cached look-up (its copy check).
        lookup = lambda: layer_graph(edge_index, n)  # noqa: E731, B023
        compare(
            rows,
            f"edge_index look-up {graph_name}",
            {"Graph": lambda: None, "look-up": lookup},
            rounds * 3,
        )
        x = torch.randn(n, CHANNELS, requires_grad=True)
        for layer_name, make in homogeneous_layers().items():
            torch.manual_seed(0)
            layer = make()
            variants = {
                "Graph": fwd_bwd(layer, x, graph),
                "edge_index": fwd_bwd(layer, x, edge_index),
            }
            compare(rows, f"{layer_name} {graph_name}", variants, rounds * 2)


def bipartite(rows: list, rounds: int) -> None:
    edge_index, users, movies = movielens_bipartite()
    x_users = torch.randn(users, CHANNELS, requires_grad=True)
    x_movies = torch.randn(movies, CHANNELS, requires_grad=True)
    x = (x_users, x_movies)
    # PyG's fastest input: a CSR adj_t [movies, users] built once (as a cached data.adj_t).
    adj_t = torch.sparse_coo_tensor(
        edge_index.flip(0), torch.ones(edge_index.size(1)), (movies, users)
    ).to_sparse_csr()
    for name, make in (
        ("SAGEConv", lambda lib: lib.SAGEConv((CHANNELS, CHANNELS), CHANNELS)),
        ("GATConv h=4", lambda lib: lib.GATConv((CHANNELS, CHANNELS), CHANNELS // 4, heads=4)),
    ):
        ours, theirs = make(gnn), make(pyg_nn)
        ours.load_state_dict(theirs.state_dict())
        variants = {
            "galfast": fwd_bwd(ours, x, edge_index),
            "PyG": fwd_bwd(theirs, x, edge_index),
            "PyG CSR": fwd_bwd(theirs, x, adj_t),
        }
        compare(rows, f"bipartite {name} movielens", variants, max(3, rounds // 2))


def gat_edge_features(rows: list, rounds: int) -> None:
    for graph_name, make_graph in (("cora", cora_like), ("pubmed", pubmed_like)):
        edge_index, n = make_graph()
        x = torch.randn(n, CHANNELS, requires_grad=True)
        attr = torch.randn(edge_index.size(1), 8, requires_grad=True)
        for edge_dim in (None, 8):  # without edge features: the homogeneous reference
            ours = gnn.GATConv(CHANNELS, CHANNELS // 4, heads=4, edge_dim=edge_dim)
            theirs = pyg_nn.GATConv(CHANNELS, CHANNELS // 4, heads=4, edge_dim=edge_dim)
            ours.load_state_dict(theirs.state_dict())
            given = (attr,) if edge_dim else ()
            variants = {
                "galfast": fwd_bwd(ours, x, edge_index, *given),
                "PyG": fwd_bwd(theirs, x, edge_index, *given),
            }
            compare(rows, f"GATConv h=4 edge_dim={edge_dim} {graph_name}", variants, rounds)


PARTS = {
    "edge_index_vs_graph": edge_index_vs_graph,
    "bipartite": bipartite,
    "edge_features": gat_edge_features,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", choices=list(PARTS), nargs="+", default=list(PARTS))
    parser.add_argument("--clock", choices=list(CLOCK), default="wall")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore", UserWarning)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.rounds} rounds, "
        f"{args.clock} clock"
    )
    rows: list = []
    global _clock
    _clock = CLOCK[args.clock]
    for part in args.only:
        PARTS[part](rows, args.rounds)
    print("\n| row | times (fastest round) | ratio |\n|---|---|---|")
    for name, fastest in rows:
        (a, ta), *others = fastest.items()
        times = ", ".join(f"{key} {ms:.2f} ms" for key, ms in fastest.items())
        ratios = ", ".join(f"{b} / {a} = {tb / ta:.2f}" for b, tb in others) if ta > 1e-3 else "-"
        print(f"| {name} | {times} | {ratios} |")


if __name__ == "__main__":
    main()
