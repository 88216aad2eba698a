"""The parts of the MovieLens training step that issue 19 rewrote, each against the form it
replaced, in one process at one thread (MovieLens-1M sizes: 8,192 ratings a batch, 9,746
nodes, 20 features, 5 levels, 2 bases). CPU time, minimum over rounds, old and new
alternating:

    PYTHONPATH=. python bench/movielens_step_parts.py --rounds 200
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from galfast.models.bilinear_forms import bilinear_forms
from galfast.train.tasks import _cross_entropy

BATCH, NODES, DIM, LEVELS, BASES, RATINGS = 8192, 9746, 20, 5, 2, 900_189


def best_us(step, rounds: int) -> float:
    for _ in range(5):
        step()
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        step()
        best = min(best, time.process_time() - start)
    return 1e6 * best


def parts() -> dict:
    gen = torch.Generator().manual_seed(0)
    z_src = torch.randn(BATCH, DIM, generator=gen, requires_grad=True)
    z_dst = torch.randn(BATCH, DIM, generator=gen, requires_grad=True)
    bases = torch.randn(BASES, DIM, DIM, generator=gen, requires_grad=True)
    grad = torch.randn(BATCH, BASES, generator=gen)
    logits = torch.randn(BATCH, LEVELS, generator=gen, requires_grad=True)
    level = torch.randint(0, LEVELS, (BATCH,), generator=gen)
    table = torch.randint(0, NODES, (RATINGS, 3), generator=gen)
    pairs, contiguous = table[:, :2].t(), table[:, :2].t().contiguous()
    levels, ratings = table[:, 2].contiguous(), table[:, 2].float()
    idx = torch.randperm(RATINGS, generator=gen)[:BATCH]
    weight = torch.randn(NODES, DIM, generator=gen, requires_grad=True)
    ids = torch.arange(NODES)
    norm = torch.nn.BatchNorm1d(DIM)
    node_grad = torch.randn(NODES, DIM, generator=gen)
    return {
        "decoder bilinear forms fwd+bwd": (
            lambda: torch.einsum("bd,sde,be->bs", z_src, bases, z_dst).backward(grad),
            lambda: bilinear_forms(z_src, bases, z_dst).backward(grad),
        ),
        "cross-entropy [8192, 5] fwd+bwd": (
            lambda: F.cross_entropy(logits, level).backward(),
            lambda: _cross_entropy(logits, level).backward(),
        ),
        "batch gather (pairs, level, rating)": (
            lambda: (pairs[:, idx], levels[idx], ratings[idx]),
            lambda: (
                contiguous.index_select(1, idx),
                levels.index_select(0, idx),
                ratings.index_select(0, idx),
            ),
        ),
        "embedding rows + BatchNorm fwd+bwd": (
            lambda: norm(weight.index_select(0, ids)).backward(node_grad),
            lambda: norm(weight).backward(node_grad),
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name, (old, new) in parts().items():
        old_us, new_us = best_us(old, args.rounds), best_us(new, args.rounds)
        old_us = min(old_us, best_us(old, args.rounds))
        new_us = min(new_us, best_us(new, args.rounds))
        print(f"{name:40s} old {old_us:8.1f} us  new {new_us:8.1f} us  {old_us / new_us:5.2f}x")


if __name__ == "__main__":
    main()
