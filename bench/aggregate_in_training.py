"""The aggregation kernel as the GAL MovieLens training calls it, against the same call replayed
(issue 19): why a profiler's per-call time differs from bench/aggregate_widths.py.

    OMP_NUM_THREADS=1 python bench/aggregate_in_training.py --encoder cheb --epochs 1

Trains the experiment's own setup (galfast.experiments.movielens, the CLI's
``galfast run --dataset synthetic-movielens-1m``) at one thread and times every aggregate
kernel launch (galfast.ops.aggregate.launch_aggregate: the forward on the graph and the backward
on its transpose) with both CPU time (process_time) and wall time; the first steps, which build
the per-graph caches, are skipped. Then it replays the last forward and backward launch of
training on the same tensors: as they were, on a fresh copy of the input, and after evicting
the caches (writing 8 MiB). Medians and minima in ms per call.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time

import torch

from galfast.experiments import runner
from galfast.experiments.config import ExperimentConfig

ops_aggregate = importlib.import_module("galfast.ops.aggregate")


def summary(seconds: list[float]) -> str:
    return f"median {1e3 * statistics.median(seconds):.2f}, min {1e3 * min(seconds):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", default="cheb")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--skip", type=int, default=5, help="first launches not counted")
    parser.add_argument("--replays", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    import galfast.experiments.movielens as movielens

    cfg = ExperimentConfig(dataset="synthetic-movielens-1m", encoder=args.encoder)
    prepared = runner.prepare(cfg)
    launch = ops_aggregate.launch_aggregate
    calls = []  # (backward?, cpu s, wall s, args)

    def timed_launch(*launch_args):
        cpu, wall = time.process_time(), time.perf_counter()
        result = launch(*launch_args)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        # The backward passes the transpose's edge ids (edge_id); the forward passes none.
        calls.append((launch_args[3] is not None, cpu, wall, launch_args))
        return result

    ops_aggregate.launch_aggregate = timed_launch
    torch.manual_seed(cfg.seed)
    try:
        movielens.train(cfg, prepared.dataset, prepared.attributes, args.epochs, False)
    finally:
        ops_aggregate.launch_aggregate = launch
    junk = torch.empty(8 << 20, dtype=torch.uint8)
    for backward in (False, True):
        mine = [c for c in calls if c[0] == backward][args.skip :]
        if not mine:
            continue
        name = "backward (transpose)" if backward else "forward"
        shape = tuple(mine[-1][3][8].shape)
        print(f"{name}, x {list(shape)}, {len(mine)} launches in training:")
        print(f"  in training, CPU time:  {summary([c[1] for c in mine])}")
        print(f"  in training, wall time: {summary([c[2] for c in mine])}")
        replay = list(mine[-1][3])
        x = replay[8]
        for label in (
            "replayed as is",
            "replayed on a fresh copy of x",
            "replayed after evicting the caches",
        ):
            seconds = []
            for _ in range(args.replays):
                if "fresh" in label:
                    replay[8] = x.clone()
                if "evicting" in label:
                    junk.fill_(1)
                start = time.process_time()
                launch(*replay)
                seconds.append(time.process_time() - start)
            replay[8] = x
            print(f"  {label}, CPU time: {summary(seconds)}")


if __name__ == "__main__":
    main()
