"""Seconds per training step of the GAL MovieLens-1M setup: the original code on PyG layers
(bench/gal_movielens_pyg.py) against galfast's GALTrainer + galfast.nn layers
(bench/gal_movielens_galfast.py), GCN, GAT and ChebNet (K=2) encoders, in one run.

    pytest bench/bench_gal_movielens.py --benchmark-only --benchmark-group-by=group \
        --benchmark-columns=min,median,max,rounds

One step = a task step on 8,192 ratings + an adversary step on 256 users, the whole graph
encoded in each. Data: ``galfast.datasets.synthetic_movielens()`` (ML-1M size: 6,040 users,
3,706 movies, 1,000,209 ratings, a 90/10 split: about 900k training ratings, 110 steps per
epoch; s/epoch = s/step x 110). Before timing, one step of each implementation from the same
weights must give the same task and adversary losses (float32 tolerance). Every round times
one step on the next batch; ``GAL_MOVIELENS_ROUNDS`` (default 5) rounds after one warm-up.
"""

from __future__ import annotations

import functools
import math
import os

import pytest
import torch
from gal_movielens_galfast import (
    build_trainer,
    copy_weights,
    gender_attribute,
    rating_batches,
    train_steps,
)
from gal_movielens_pyg import LAYERS, GALMovieLens, train_step

from galfast.datasets import synthetic_movielens

pytest.importorskip("torch_geometric")

BATCH_SIZE = 8192
ADV_BATCH_SIZE = 256
LR, LAM = 0.01, 0.5
ROUNDS = int(os.environ.get("GAL_MOVIELENS_ROUNDS", "5"))
# Peers of a group (pyg, galfast) run back to back.
CASES = [
    pytest.param(device, kind, impl, marks=[pytest.mark.cuda] if device == "cuda" else [])
    for device in ("cpu", "cuda")
    for kind in LAYERS
    for impl in ("pyg", "galfast")
]


def training_data(device: str, num_batches: int | None = None, seed: int = 0) -> dict:
    """The synthetic ML-1M-size dataset on ``device``, its shuffled training ratings as the
    original's ``(user, level, movie)`` batches of 8,192 (the first ``num_batches``, or all),
    an adversary batch of 256 users per rating batch, and the original's ``edge_index``."""
    ds = synthetic_movielens().to(device)
    users, movies, stars = ds.train_ratings.unbind(1)
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(users.numel(), generator=gen).to(device)
    rows = torch.stack([users, stars - 1, movies], dim=1)[order]
    p_batches = list(rows.split(BATCH_SIZE))[:num_batches]
    adv_users = [
        torch.randperm(ds.num_users, generator=gen)[:ADV_BATCH_SIZE].to(device) for _ in p_batches
    ]
    return {
        "ds": ds,
        "edge_index": torch.cat([torch.stack([users, movies]), torch.stack([movies, users])], 1),
        "p_batches": p_batches,
        "adv_users": adv_users,
        "gender": ds.attributes["gender"],
        "steps_per_epoch": math.ceil(users.numel() / BATCH_SIZE),
    }


@functools.cache
def data(device: str) -> dict:
    return training_data(device, num_batches=ROUNDS + 2)


@functools.cache
def check_equivalence(kind: str, device: str) -> None:
    """One step from the same weights: same task loss and same adversary loss (all users)."""
    d = data(device)
    torch.manual_seed(0)
    original = GALMovieLens(kind, d["ds"].num_nodes, d["edge_index"]).to(device)
    trainer = build_trainer(kind, d["ds"].num_nodes, lam=LAM, adv_batch_size=None, device=device)
    copy_weights(trainer, original)
    everyone = torch.arange(d["ds"].num_users, device=device)
    losses = train_step(
        original, *original.optimizers(LR, LAM), d["p_batches"][0], everyone, d["gender"]
    )
    record = train_steps(
        trainer, d["ds"].graph, rating_batches(d["p_batches"][:1]), gender_attribute(d["gender"])
    )
    mine = torch.tensor([record["task_loss"], record["adv_loss/gender"]])
    torch.testing.assert_close(mine, torch.stack(losses).cpu(), rtol=1e-4, atol=1e-5)


def pyg_runner(kind: str, device: str):
    d = data(device)
    torch.manual_seed(0)
    model = GALMovieLens(kind, d["ds"].num_nodes, d["edge_index"]).to(device)
    optimizers = model.optimizers(LR, LAM)
    return lambda i: train_step(
        model, *optimizers, d["p_batches"][i], d["adv_users"][i], d["gender"][d["adv_users"][i]]
    )


def galfast_runner(kind: str, device: str):
    d = data(device)
    torch.manual_seed(0)
    trainer = build_trainer(kind, d["ds"].num_nodes, lam=LAM, device=device)
    batches, gender = rating_batches(d["p_batches"]), gender_attribute(d["gender"])
    return lambda i: train_steps(trainer, d["ds"].graph, batches[i : i + 1], gender)


@pytest.mark.parametrize(("device", "kind", "impl"), CASES)
def test_gal_movielens_step(benchmark, device, kind, impl):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    check_equivalence(kind, device)
    step = (pyg_runner if impl == "pyg" else galfast_runner)(kind, device)
    counter = iter(range(ROUNDS + 1))

    def run():
        step(next(counter))
        if device == "cuda":
            torch.cuda.synchronize()

    benchmark.group = f"gal-movielens step {device} {kind}"
    benchmark.extra_info["steps_per_epoch"] = data(device)["steps_per_epoch"]
    benchmark.pedantic(run, rounds=ROUNDS, iterations=1, warmup_rounds=1)
