"""Which order to contract NNConv's bilinear message in: forward + backward time of the three
orders written in plain PyTorch, next to galfast's fused kernel, on QM9-like batches.

    python bench/nnconv_orders.py [--threads 1] [--repeats 5]

With Theta_e = reshape(W h_e + b, [F_in, F_out]) and e = (u -> v):
- per edge (PyG's order): Theta_e for every edge, then x_u @ Theta_e;       E * K * F_in * F_out
- by destination (S):     S_v = sum_e h_e (x) x_u, then S_v : W per node;   E * K * F_in
                                                                           + N * K * F_in * F_out
- by source (Y):          Y_u = x_u : W per node ([K, F_out]), then h_e . Y_u per edge;
                                                              N * K * F_in * F_out + E * K * F_out
The two per-node orders do the same dense work; the source order moves a [K, F_out] row of
Y per edge where the destination order reads x_u and h_e (F_in + K values).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from molecules import molecule_batch  # noqa: E402

from galfast.nn._graph_input import csr_from_coo  # noqa: E402
from galfast.ops import nnconv_aggregate  # noqa: E402

F_IN = F_OUT = 64
HIDDEN = 128


def per_edge(x, h, w, b, src, dst, n):
    theta = (h @ w.t() + b).view(-1, F_IN, F_OUT)
    messages = torch.bmm(x[src].unsqueeze(1), theta).squeeze(1)
    return x.new_zeros(n, F_OUT).index_add(0, dst, messages)


def by_destination(x, h, w, b, src, dst, n):
    outer = (h.unsqueeze(2) * x[src].unsqueeze(1)).view(-1, HIDDEN * F_IN)
    s = x.new_zeros(n, HIDDEN * F_IN).index_add(0, dst, outer)
    a = x.new_zeros(n, F_IN).index_add(0, dst, x[src])
    w3 = w.view(F_IN, F_OUT, HIDDEN).permute(2, 0, 1).reshape(HIDDEN * F_IN, F_OUT)
    return s @ w3 + a @ b.view(F_IN, F_OUT)


def by_source(x, h, w, b, src, dst, n):
    wx = w.view(F_IN, F_OUT, HIDDEN).permute(0, 2, 1).reshape(F_IN, HIDDEN * F_OUT)
    y = (x @ wx).view(n, HIDDEN, F_OUT)
    messages = torch.bmm(h.unsqueeze(1), y[src]).squeeze(1) + x[src] @ b.view(F_IN, F_OUT)
    return x.new_zeros(n, F_OUT).index_add(0, dst, messages)


def fused(x, h, w, b, src, dst, n, graph, order):
    return nnconv_aggregate(graph, x, h[order], w, b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"forward + backward ms, 128 QM9-like molecules, {args.threads} thread(s)")
    print(
        "| graph | edges | per edge (PyG's order) | by destination (S) | by source (Y) | "
        "galfast kernel (S) |"
    )
    print("|---|---|---|---|---|---|")
    for name in ("bonds", "complete"):
        edge_index, _, _, n = molecule_batch(128, complete=name == "complete")
        src, dst = edge_index
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(n, F_IN, generator=gen, requires_grad=True)
        h = torch.randn(src.numel(), HIDDEN, generator=gen, requires_grad=True)
        w = (torch.randn(F_IN * F_OUT, HIDDEN, generator=gen) * 0.05).requires_grad_()
        b = torch.zeros(F_IN * F_OUT, requires_grad=True)
        graph, order = csr_from_coo(dst, src, n)
        kernel = functools.partial(fused, graph=graph, order=order)
        row = []
        for fn in (per_edge, by_destination, by_source, kernel):
            times = []
            for k in range(args.repeats + 1):
                start = time.perf_counter()
                fn(x, h, w, b, src, dst, n).sum().backward()
                if k:
                    times.append(time.perf_counter() - start)
            row.append(statistics.median(times) * 1e3)
        print(f"| {name} | {src.numel()} | " + " | ".join(f"{t:.0f}" for t in row) + " |")


if __name__ == "__main__":
    main()
