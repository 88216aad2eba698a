"""galfast.nn.BatchNorm against torch.nn.BatchNorm1d (and a torch composite: var_mean and
elementwise ops under autograd) in training mode on [N, C] node features, forward and
forward + backward (x, weight, bias), in the same run:

    python bench/bench_batch_norm.py --shapes 9746x20 19717x64 100000x128 --threads 1 2

At one thread the time is CPU time (process_time), so load from other processes inflates all
columns alike; at more threads it is wall time (the kernels run in parallel), meaningful only on
a quiet machine (with other processes on the cores, a parallel region waits for a time slice
and the numbers mean nothing). Each number is the minimum over --rounds rounds, each round
timing every contender in turn: one untimed call (a contender's first call after another's
pays for page faults of fresh output buffers), then a few timed ones.
"""

from __future__ import annotations

import argparse
import time

import torch

from galfast.nn import BatchNorm


def composite(x, weight, bias, eps=1e-5):
    """Batch normalisation from torch's building blocks (autograd differentiates it)."""
    var, mean = torch.var_mean(x, 0, unbiased=False)
    return (x - mean) * (weight * torch.rsqrt(var + eps)) + bias


def per_call(fns, rounds, calls, clock):
    for fn in fns:
        fn()
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            fn()  # untimed: the allocator settles after the previous contender's buffers
            start = clock()
            for _ in range(calls):
                fn()
            best[k] = min(best[k], (clock() - start) / calls)
    return best


def contenders(c: int, n: int, dtype: torch.dtype, backward: bool):
    """(galfast, torch, composite) closures over one input."""
    torch.manual_seed(0)
    x = torch.randn(n, c, dtype=dtype, requires_grad=True)
    grad = torch.randn(n, c, dtype=dtype)
    ours, theirs = BatchNorm(c, dtype=dtype), torch.nn.BatchNorm1d(c, dtype=dtype)
    w = torch.ones(c, dtype=dtype, requires_grad=True)
    b = torch.zeros(c, dtype=dtype, requires_grad=True)
    if not backward:
        return (lambda: ours(x.detach()), lambda: theirs(x.detach()), lambda: composite(x, w, b))

    def step(module):
        return lambda: torch.autograd.grad(module(x), (x, *module.parameters()), grad)

    comp = lambda: torch.autograd.grad(composite(x, w, b), (x, w, b), grad)  # noqa: E731
    return (step(ours), step(theirs), comp)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", default=["9746x20", "19717x64", "100000x128"])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    print("shape threads pass | galfast_us torch_us composite_us | torch/galfast composite/galfast")
    for shape in args.shapes:
        n, c = (int(v) for v in shape.split("x"))
        calls = max(3, 2_000_000 // (n * c))
        for threads in args.threads:
            torch.set_num_threads(threads)
            clock = time.process_time if threads == 1 else time.perf_counter
            for name, backward in (("fwd", False), ("fwd+bwd", True)):
                fns = contenders(c, n, dtype, backward)
                g, t, k = (1e6 * s for s in per_call(fns, args.rounds, calls, clock))
                print(
                    f"{shape} {threads} {name:7s} | {g:9.1f} {t:9.1f} {k:9.1f} | "
                    f"{t / g:5.2f} {k / g:5.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
