"""The trainer's LeanAdam against torch.optim.Adam(fused=True) on the MovieLens encoder's and
decoder's parameter shapes, one thread, CPU time, alternating, minimum over rounds:

    PYTHONPATH=. python bench/bench_lean_adam.py --rounds 30
"""

from __future__ import annotations

import argparse
import time

import torch

from galfast.train.lean_adam import LeanAdam

SHAPES = [(9746, 20), (20,), (20,), (20, 20), (20, 20), (20,), (2, 20, 20), (5, 2)]


def _optimizer(cls) -> torch.optim.Optimizer:
    params = [torch.randn(shape, requires_grad=True) for shape in SHAPES]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = cls(params, lr=0.01, fused=True)
    opt.step()  # creates the state
    return opt


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    contenders = {
        "torch Adam(fused)": _optimizer(torch.optim.Adam),
        "LeanAdam": _optimizer(LeanAdam),
    }
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(args.rounds):
        for name, opt in contenders.items():
            started = time.process_time()
            for _ in range(args.steps):
                opt.step()
            best[name] = min(best[name], (time.process_time() - started) / args.steps)
    for name, seconds in best.items():
        print(f"{name}: {seconds * 1e6:.1f} us a step")


if __name__ == "__main__":
    main()
