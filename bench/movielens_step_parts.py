"""The parts of the MovieLens training step that issue 19 rewrote, each against the form it
replaced, in one process at one thread (MovieLens-1M sizes: 8,192 ratings a batch, 9,746
nodes, 20 features, 5 levels, 2 bases). CPU time, minimum over rounds, old and new
alternating:

    PYTHONPATH=. python bench/movielens_step_parts.py --rounds 200
    PYTHONPATH=. python bench/movielens_step_parts.py --rounds 200 --cold

``--cold`` writes a 64 MiB buffer (untimed) before every timed call: in the training step the
aggregation over 1.8M edges has evicted the step's other data from the caches.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from galfast.models.bilinear_forms import bilinear_forms
from galfast.train.batches import RatingBatches
from galfast.train.tasks import _cross_entropy

BATCH, NODES, DIM, LEVELS, BASES, RATINGS = 8192, 9746, 20, 5, 2, 900_189


_EVICT = torch.zeros(16 * 1024 * 1024)


def best_us(step, rounds: int, cold: bool = False) -> float:
    for _ in range(5):
        step()
    best = float("inf")
    for _ in range(rounds):
        if cold:
            _EVICT.add_(1.0)
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
    users, movies = (
        torch.randint(0, 6040, (RATINGS,), generator=gen),
        torch.randint(6040, NODES, (RATINGS,), generator=gen),
    )
    stars = torch.randint(1, 6, (RATINGS,), generator=gen)
    batches = RatingBatches(torch.stack([users, movies]), stars, levels=range(1, 6))

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
        "rating batch: 4 gathers -> 1 packed key": (
            lambda: (
                batches.edge_index.index_select(1, idx),
                batches.level.index_select(0, idx),
                batches.rating.index_select(0, idx),
            ),
            lambda: batches._packed.batch(idx, batches.levels),
        ),
        "embedding rows + BatchNorm fwd+bwd": (
            lambda: norm(weight.index_select(0, ids)).backward(node_grad),
            lambda: norm(weight).backward(node_grad),
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--cold", action="store_true", help="evict the caches before each call")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name, (old, new) in parts().items():
        old_us, new_us = (best_us(f, args.rounds, args.cold) for f in (old, new))
        old_us = min(old_us, best_us(old, args.rounds, args.cold))
        new_us = min(new_us, best_us(new, args.rounds, args.cold))
        print(f"{name:40s} old {old_us:8.1f} us  new {new_us:8.1f} us  {old_us / new_us:5.2f}x")


if __name__ == "__main__":
    main()
