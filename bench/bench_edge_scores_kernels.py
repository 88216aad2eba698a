"""The CPU kernels of ``ops.bilinear_edge_scores`` alone, forward and backward, on a MovieLens
batch: the edges-in-lanes AVX-512 kernel against the AVX2 kernel it replaces for float32
(``_C.set_edge_scores_simd`` switches between them), in one process, alternating call by call:

    PYTHONPATH=. python bench/bench_edge_scores_kernels.py --threads 1 --rounds 300
    PYTHONPATH=. python bench/bench_edge_scores_kernels.py --threads 1 --dim 64 --bases 3

Each call runs through the op's kernel launchers (``_edge_scores``, ``_edge_scores_backward``:
output allocation included, no autograd). At one thread each is timed as CPU time
(time.process_time), at more as wall time; the minimum over rounds is printed. Both give the
same scores and gradients to rounding (checked before timing). Needs a CPU with AVX-512.
"""

from __future__ import annotations

import argparse
import time

import torch

from galfast._native import _C
from galfast.ops.edge_scores import _edge_scores, _edge_scores_backward

BATCH, USERS, NODES, LEVELS = 8192, 6040, 9746, 5


def _inputs(dim: int, num_bases: int):
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(NODES, dim, generator=gen)
    src = torch.randint(0, USERS, (BATCH,), generator=gen)
    dst = torch.randint(USERS, NODES, (BATCH,), generator=gen)
    bases = torch.randn(num_bases, dim, dim, generator=gen)
    coefficients = torch.randn(LEVELS, num_bases, generator=gen)
    grad = torch.randn(LEVELS, BATCH, generator=gen)  # the [R, B] layout the kernels read
    return z, src, dst, bases, coefficients, grad


def _call(inputs, lanes: bool, clock):
    """(forward seconds, backward seconds, outputs) of one call with the kernel picked."""
    z, src, dst, bases, coefficients, grad = inputs
    before = _C.set_edge_scores_simd(lanes)
    try:
        start = clock()
        out, projected = _edge_scores(z, src, dst, bases, coefficients)
        middle = clock()
        grads = _edge_scores_backward(grad, z, src, dst, bases, coefficients, projected)
        end = clock()
    finally:
        _C.set_edge_scores_simd(before)
    return middle - start, end - middle, (out, *grads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--dim", type=int, default=20)
    parser.add_argument("--bases", type=int, default=2)
    args = parser.parse_args()
    if not _C.edge_scores_edges_in_lanes(_C.DType.FLOAT32, args.dim):
        raise SystemExit("this CPU (or dim) does not run the edges-in-lanes kernel")
    torch.set_num_threads(args.threads)
    inputs = _inputs(args.dim, args.bases)
    clock = time.perf_counter if args.threads > 1 else time.process_time
    *_, avx2 = _call(inputs, False, clock)
    *_, lanes = _call(inputs, True, clock)
    for a, b in zip(avx2, lanes):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-4)
    best = {(k, part): float("inf") for k in ("avx2", "lanes") for part in ("fwd", "bwd")}
    for _ in range(args.rounds):
        for name in ("avx2", "lanes"):
            forward, backward, _ = _call(inputs, name == "lanes", clock)
            best[name, "fwd"] = min(best[name, "fwd"], forward)
            best[name, "bwd"] = min(best[name, "bwd"], backward)
    total = {k: best[k, "fwd"] + best[k, "bwd"] for k in ("avx2", "lanes")}
    cells = "  ".join(
        f"{k} fwd {1e6 * best[k, 'fwd']:6.1f} bwd {1e6 * best[k, 'bwd']:7.1f} us" for k in total
    )
    print(
        f"edge scores kernels B={BATCH} D={args.dim} S={args.bases} R={LEVELS} "
        f"[{args.threads} thread(s), {'wall' if args.threads > 1 else 'CPU'}]  {cells}  "
        f"{total['avx2'] / total['lanes']:4.2f}x"
    )


if __name__ == "__main__":
    main()
