"""Wall and CPU time of the MovieLens training alone (the `galfast run --dataset
synthetic-movielens-1m --encoder cheb` setup, no audit) at a given thread count, for one
checkout (run it from each checkout, alternating, to compare builds):

    PYTHONPATH=. python bench/movielens_epochs.py --threads 2 --epochs 3

Prints the seconds of `prepare` (the stand-in dataset and its graph), then the wall and CPU
seconds of the epochs and the test RMSE (which must not depend on the thread count).
"""

from __future__ import annotations

import argparse
import time

import torch

import galfast.experiments.movielens as movielens
from galfast.experiments.config import ExperimentConfig
from galfast.experiments.runner import prepare


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--encoder", default="cheb")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cfg = ExperimentConfig(dataset="synthetic-movielens-1m", encoder=args.encoder)
    started = time.perf_counter()
    prepared = prepare(cfg)
    print(f"prepare {time.perf_counter() - started:.2f} s")
    torch.manual_seed(0)
    wall, cpu = time.perf_counter(), time.process_time()
    _, metrics = movielens.train(cfg, prepared.dataset, prepared.attributes, args.epochs, False)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(
        f"{args.epochs} epochs at {args.threads} thread(s): wall {wall:.2f} s, CPU {cpu:.2f} s, "
        f"rmse {metrics['rmse']!r}"
    )


if __name__ == "__main__":
    main()
