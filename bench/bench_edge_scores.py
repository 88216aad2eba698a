"""GC-MC's bilinear rating decoder on a MovieLens batch, forward + backward: the fused
``ops.bilinear_edge_scores`` against the composition ``EdgeHead`` ran before it (two
``ops.gather_rows``, ``bilinear_forms``' product and row dots with ``ops.row_dot_grads`` in
the backward, the coefficient product), in one process, alternating round by round:

    PYTHONPATH=. python bench/bench_edge_scores.py --threads 1 --rounds 300
    PYTHONPATH=. python bench/bench_edge_scores.py --threads 2 --rounds 300

B = 8,192 edges, N = 9,746 nodes, D = 20, S = 2 bases, R = 5 levels (the paper's MovieLens
setup). At one thread each call is timed as CPU time (time.process_time), at more as wall time
(time.perf_counter); the minimum over rounds is printed. Both give the same scores and
gradients to rounding (checked before timing). The incoming gradient has the training step's
layout (``rating_cross_entropy`` reads the scores transposed).
"""

from __future__ import annotations

import argparse

import torch
from interleaved import best_times

from galfast import ops
from galfast.models import BilinearRatingDecoder

BATCH, USERS, NODES, DIM = 8192, 6040, 9746, 20


def _setup():
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(NODES, DIM, generator=gen, requires_grad=True)
    src = torch.randint(0, USERS, (BATCH,), generator=gen)
    dst = torch.randint(USERS, NODES, (BATCH,), generator=gen)
    torch.manual_seed(0)
    decoder = BilinearRatingDecoder(DIM)
    # The gradient in the layout rating_cross_entropy's backward gives it: [R, B] storage, seen
    # as [B, R] (the transposed view of its contiguous [1, R, B] input's gradient).
    grad = torch.randn(5, BATCH, generator=gen).t()
    return z, src, dst, decoder, grad


def step_fn(fused: bool):
    z, src, dst, decoder, grad = _setup()

    def step():
        z.grad = None
        decoder.zero_grad(set_to_none=True)
        if fused:
            out = ops.bilinear_edge_scores(z, src, dst, decoder.bases, decoder.coefficients)
        else:
            out = decoder(ops.gather_rows(z, src), ops.gather_rows(z, dst))
        out.backward(grad)
        return out.detach(), z.grad, decoder.bases.grad, decoder.coefficients.grad

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    steps = {"composition": step_fn(False), "fused": step_fn(True)}
    before, now = (fn() for fn in steps.values())
    for a, b in zip(before, now):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-4)
    wall = args.threads > 1
    best = best_times(steps, args.rounds, wall)
    ratio = best["composition"] / best["fused"]
    cells = "  ".join(f"{n} {1e6 * t:7.1f} us" for n, t in best.items())
    print(
        f"bilinear edge scores fwd+bwd B={BATCH} D={DIM} S=2 R=5 [{args.threads} thread(s), "
        f"{'wall' if wall else 'CPU'}]  {cells}  {ratio:4.2f}x"
    )


if __name__ == "__main__":
    main()
