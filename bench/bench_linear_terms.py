"""ChebConv's sum of term products, ``b + sum_k s_k T_k W_k^T``: the fused
``ops.linear_terms`` against torch's best composition (one GEMM per term added in place into the
first, then the bias in place: the form ChebConv ran before; ``addmm`` chains and one GEMM over
concatenated terms measured slower), forward alone and forward + backward, in one process,
alternating round by round:

    PYTHONPATH=. python bench/bench_linear_terms.py --threads 1 --rounds 300
    PYTHONPATH=. python bench/bench_linear_terms.py --threads 2 --rounds 300

Shapes: the MovieLens-1M encoder's (9,746 nodes, K = 2 terms of 20 features, 20 outputs, the
odd term negated as ChebConv's GCN form does), PubMed-size (19,717 nodes, 500 -> 16 as a first
layer is not ChebConv's K > 1 case; here K = 2, 16 -> 16) and a wider K = 3, 64 -> 64. At one
thread each call is timed as CPU time, at more as wall time; the minimum over rounds is
printed. Both give the same results to rounding (checked before timing).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from interleaved import best_times

from galfast import ops

SHAPES = {
    "MovieLens-1M K=2 20->20": (9746, 20, 20, 2),
    "PubMed-size K=2 16->16": (19717, 16, 16, 2),
    "MovieLens-1M K=3 64->64": (9746, 64, 64, 3),
}


def _inputs(rows, width, outputs, count):
    gen = torch.Generator().manual_seed(0)
    terms = [torch.randn(rows, width, generator=gen, requires_grad=True) for _ in range(count)]
    weights = [torch.randn(outputs, width, generator=gen, requires_grad=True) for _ in range(count)]
    bias = torch.randn(outputs, generator=gen, requires_grad=True)
    negate = [k % 2 == 1 for k in range(count)]
    grad = torch.randn(rows, outputs, generator=gen)
    return terms, weights, bias, negate, grad


def composition(terms, weights, bias, negate):
    out = F.linear(terms[0], weights[0])
    for t, w, minus in zip(terms[1:], weights[1:], negate[1:]):
        out.add_(F.linear(t, -w if minus else w))
    return out.add_(bias)


def steps_for(shape, backward: bool):
    terms, weights, bias, negate, grad = _inputs(*shape)
    leaves = [*terms, *weights, bias]

    def step(fn):
        def run():
            for t in leaves:
                t.grad = None
            if not backward:
                with torch.no_grad():
                    return (fn(terms, weights, bias, negate),)
            out = fn(terms, weights, bias, negate)
            out.backward(grad)
            return (out.detach(), *(t.grad for t in leaves))

        return run

    return {"torch": step(composition), "fused": step(ops.linear_terms)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    wall = args.threads > 1
    for label, shape in SHAPES.items():
        for backward in (False, True):
            steps = steps_for(shape, backward)
            before, now = (fn() for fn in steps.values())
            for a, b in zip(before, now):
                torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-3)
            best = best_times(steps, args.rounds, wall, warmup=5)
            ratio = best["torch"] / best["fused"]
            cells = "  ".join(f"{n} {1e6 * t:8.1f} us" for n, t in best.items())
            print(
                f"{label:26s} {'fwd+bwd' if backward else 'fwd    '} [{args.threads} thread(s), "
                f"{'wall' if wall else 'CPU'}]  {cells}  {ratio:4.2f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
