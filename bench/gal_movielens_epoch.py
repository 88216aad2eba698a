"""Wall-clock seconds of whole GAL MovieLens-1M epochs, the quantity the issue's targets name
(bench/bench_gal_movielens.py times single steps; this runs every step of an epoch).

    python bench/gal_movielens_epoch.py --device cuda --kind gcn --impl galfast galfast-graphs pyg

``galfast-graphs`` is galfast with ``GALTrainer(cuda_graphs=True)`` (GPU only). For each
implementation: one warm-up epoch (caches, autotuning, allocator), then ``--epochs``
timed epochs over the ~900k training ratings of ``synthetic_movielens()`` in batches of
8,192 (110 task steps, each followed by an adversary step on 256 users). Prints one JSON line
per implementation with the seconds of each timed epoch; ``--profile`` then runs one more epoch
of each under torch.profiler and prints its busiest operators (by self device time on a GPU).
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from bench_gal_movielens import LAM, LR, training_data
from gal_movielens_galfast import build_trainer, gender_attribute, rating_batches, train_steps
from gal_movielens_pyg import GALMovieLens, train_step


def galfast_epoch(kind: str, device: str, d: dict, cuda_graphs: bool = False):
    trainer = build_trainer(
        kind, d["ds"].num_nodes, lam=LAM, lr=LR, device=device, cuda_graphs=cuda_graphs
    )
    rating, gender = rating_batches(d["p_batches"]), gender_attribute(d["gender"])
    return lambda: train_steps(trainer, d["ds"].graph, rating, gender)


def pyg_epoch(kind: str, device: str, d: dict):
    model = GALMovieLens(kind, d["ds"].num_nodes, d["edge_index"]).to(device)
    optimizers = model.optimizers(LR, LAM)

    def run():
        for batch, users in zip(d["p_batches"], d["adv_users"]):
            train_step(model, *optimizers, batch, users, d["gender"][users])

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--kind", choices=("gcn", "gat", "cheb"), default="gcn")
    parser.add_argument(
        "--impl", nargs="+", choices=("galfast", "galfast-graphs", "pyg"), default=["galfast"]
    )
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="profile one more epoch")
    args = parser.parse_args()

    data = training_data(args.device)
    for impl in args.impl:
        torch.manual_seed(0)
        if impl == "pyg":
            epoch = pyg_epoch(args.kind, args.device, data)
        else:
            epoch = galfast_epoch(args.kind, args.device, data, impl == "galfast-graphs")
        seconds = []
        for i in range(args.epochs + 1):
            start = time.perf_counter()
            epoch()
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            if i:  # epoch 0 warms up
                seconds.append(time.perf_counter() - start)
        steps = len(data["p_batches"])
        record = {"impl": impl, "kind": args.kind, "device": args.device, "steps": steps}
        print(json.dumps(record | {"seconds_per_epoch": seconds}), flush=True)
        if args.profile:
            print_profile(epoch, args.device)


def print_profile(epoch, device: str) -> None:
    from torch.profiler import ProfilerActivity, profile

    on_gpu = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with profile(activities=activities) as prof:
        epoch()
        if on_gpu:
            torch.cuda.synchronize()
    key = "self_cuda_time_total" if on_gpu else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=key, row_limit=25, max_name_column_width=48))


if __name__ == "__main__":
    main()
