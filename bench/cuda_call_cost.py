"""Where a GPU aggregation call's host time goes, against torch.sparse.mm, on small and large
graphs (a CUDA machine only):

    python bench/cuda_call_cost.py [--profile]

For each graph (empty, PubMed-size, MovieLens-size), F = 16 and 128, and each pass (``fwd``:
x needs no gradient; ``fwd+bwd``), two numbers per implementation, minimum over rounds:
``host``, the wall time per call of a burst of calls with no synchronisation (the launch queue
never fills, so this is the host's cost alone), and ``synced``, a call followed by
torch.cuda.synchronize() (what pytest-benchmark's bench_aggregate times). Then the host cost of
the pieces a galfast call is made of, and with ``--profile`` galfast's calls under cProfile
(the functions with the most own time).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import time
import warnings

import torch
from graphs import movielens_like, pubmed_like

from galfast import Graph
from galfast._native import _C
from galfast.ops import aggregate

BURST, ROUNDS = 200, 15


def host_per_call(fn) -> float:
    """Microseconds of host time per call, from bursts of BURST unsynchronised calls."""
    best = float("inf")
    for _ in range(ROUNDS):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(BURST):
            fn()
        best = min(best, (time.perf_counter() - start) / BURST)
    torch.cuda.synchronize()
    return best * 1e6


def synced_per_call(fn) -> float:
    best = float("inf")
    for _ in range(ROUNDS * 20):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best * 1e6


def implementations(g: Graph, n: int) -> dict:
    scale = g.degree_scale("gcn", torch.float32)
    weight = scale[g.row] * scale[g.col]
    colptr, csc_row, csc_edge_id = g.csc
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a64 = torch.sparse_csr_tensor(g.rowptr, g.col, weight, (n, n))
        a32 = torch.sparse_csr_tensor(g.rowptr.int(), g.col.int(), weight, (n, n))
        a32_t = torch.sparse_csr_tensor(colptr.int(), csc_row.int(), weight[csc_edge_id], (n, n))

    class CachedTranspose(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return torch.sparse.mm(a32, x)

        @staticmethod
        def backward(ctx, grad):
            return torch.sparse.mm(a32_t, grad.contiguous())

    return {
        "galfast": lambda x: aggregate(g, x, norm="gcn"),
        "torch.sparse.mm int64": lambda x: torch.sparse.mm(a64, x),
        "torch.sparse.mm int32 cachedT": CachedTranspose.apply,
    }


def pieces(device: torch.device) -> dict[str, float]:
    """Host microseconds of the parts every galfast CUDA call has."""
    x = torch.randn(100, 16, device=device)
    raw_stream = torch._C._cuda_getCurrentRawStream
    return {
        "torch.empty(100, 16) on cuda": host_per_call(lambda: x.new_empty(100, 16)),
        "torch.empty(100, 16) on cpu": host_per_call(lambda: torch.empty(100, 16)),
        "current raw stream": host_per_call(lambda: raw_stream(0)),
        "AggregateParams()": host_per_call(_C.AggregateParams),
        "a call into the extension (_C.get_num_threads)": host_per_call(_C.get_num_threads),
        "x.add_(1) (one torch kernel launch)": host_per_call(lambda: x.add_(1)),
    }


def measure_graph(g: Graph, n: int, f: int, label: str, profile: bool) -> dict:
    x = torch.randn(n, f, device=g.device)
    xg = x.clone().requires_grad_()
    grad = torch.ones(n, f, device=g.device)
    results = {}
    for impl, fn in implementations(g, n).items():
        calls = {
            "fwd": lambda fn=fn: fn(x),
            "fwd+bwd": lambda fn=fn: fn(xg).backward(grad),
        }
        for pass_, call in calls.items():
            call()  # caches, lazy imports
            key = f"{label} {pass_} {impl}"
            results[key] = {"host": host_per_call(call), "synced": synced_per_call(call)}
            print(key, {k: round(v, 1) for k, v in results[key].items()}, flush=True)
            if profile and impl == "galfast":
                print_profile(call, f"galfast {pass_} on {label}")
    return results


def print_profile(call, label: str) -> None:
    """cProfile of 2000 calls, the functions with the most own time."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(2000):
        call()
    profile.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(18)
    print(f"== {label}, 2000 calls, by own time")
    print(text.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    device = torch.device("cuda")
    graphs = {
        "empty": (torch.zeros(2, 0, dtype=torch.long), 1),
        "pubmed": pubmed_like(),
        "movielens": movielens_like(),
    }
    results = {"pieces": pieces(device)}
    for name, (edge_index, n) in graphs.items():
        g = Graph.from_edge_index(edge_index, n).to(device)
        for f in (16, 128):
            results.update(
                measure_graph(
                    g, n, f, f"{name} F={f}", args.profile and name == "pubmed" and f == 16
                )
            )
    for key, value in results["pieces"].items():
        print(f"{key}: {value:.2f} us")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
