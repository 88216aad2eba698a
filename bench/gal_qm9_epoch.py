"""A GAL training epoch of the QM9 MPNN, galfast against the same MPNN built from PyG layers
(bench/qm9_pyg_model.py: PyG's qm9_nn_conv example on its NNConv and Set2Set, its per-molecule
transforms and collation, GAL's adversary step), timed over a fixed number of batches of the
training split and extrapolated to the epoch's 866.

    python bench/gal_qm9_epoch.py --batches 20 --threads 1
    python bench/gal_qm9_epoch.py --check 3                  # same losses step by step
    python bench/gal_qm9_epoch.py --impl galfast --profile

galfast's side is the QM9 setup (galfast/experiments/qm9.py): GraphBatches of 128 molecules
with the complete-graph transform, MPNN dim 64 (NNConv mean + GRU, 3 steps, Set2Set 3), task
MSE on normalised mu, lambda 0.05 with the alpha adversary (AttackerMLP 128-64-1) on the
Set2Set readout after every task step, Adam 1e-3. QM9 comes from ``galfast.datasets.qm9()``
(qm9pack + RDKit, or the canonical files; cached after the first load). Both sides start from
the same weights and see the same molecules in the same batches. Each side: ``--warmup``
batches untimed, then ``--batches`` timed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from itertools import islice
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from qm9_pyg_model import ReferenceGAL, collate, from_galfast, molecule_data  # noqa: E402

from galfast.datasets import complete_graph, qm9, target_statistics  # noqa: E402
from galfast.experiments.qm9 import MPNNReadout, molecule_split  # noqa: E402
from galfast.gal import SensitiveAttribute  # noqa: E402
from galfast.gal.seeding import derive_seed, seeded_generator  # noqa: E402
from galfast.models import MPNN, AttackerMLP  # noqa: E402
from galfast.train import GALTrainer, GraphBatches, GraphHead, regression_loss  # noqa: E402
from galfast.train.batch_indices import index_batches  # noqa: E402

LAM, LR, BATCH, SEED, DIM = 0.05, 1e-3, 128, 0, 64


class FirstBatches:
    def __init__(self, batches, count: int) -> None:
        self.batches, self.count = batches, count

    def __iter__(self):
        return islice(iter(self.batches), self.count)


def load():
    ds = qm9()
    train_idx, _, _ = molecule_split(len(ds))
    mu = ds.target("mu").unsqueeze(1)
    mean, std = target_statistics(mu, train_idx)
    return ds, train_idx, (mu - mean) / std


def build(ds):
    torch.manual_seed(SEED)
    mpnn = MPNN(ds.num_node_features, ds.num_edge_features + 1, dim=DIM)
    return mpnn, AttackerMLP(2 * DIM, 1, hidden=(DIM,))


def batch_ids(train_idx: torch.Tensor, epoch: int, count: int) -> list[torch.Tensor]:
    """GraphBatches(index=train_idx, seed=SEED)'s first `count` batches of epoch `epoch`."""
    gen = seeded_generator(derive_seed(SEED, "graph_batches", epoch))
    chunks = index_batches(train_idx.numel(), BATCH, True, gen)
    return [train_idx[chunk] for chunk in islice(chunks, count)]


class GalfastRun:
    def __init__(self, ds, train_idx, y):
        mpnn, attacker = build(ds)
        self.alpha = SensitiveAttribute("alpha", "continuous", ds.attributes["alpha"])
        self.trainer = GALTrainer(
            MPNNReadout(mpnn),
            GraphHead(nn.Sequential(mpnn.lin1, nn.ReLU(), mpnn.lin2)),
            attacker,
            task_loss=regression_loss,
            lam=LAM,
            lr=LR,
            seed=SEED,
        )
        self.batches = GraphBatches(
            ds, y, BATCH, True, index=train_idx, seed=SEED, transform=complete_graph
        )

    def run(self, count: int) -> dict:
        epoch = self.trainer.epoch + 1
        return self.trainer.fit(
            None, FirstBatches(self.batches, count), self.alpha, epoch, progress=False
        ).last


class PygRun:
    def __init__(self, ds, train_idx, y):
        mpnn, attacker = build(ds)
        net, ref_attacker = from_galfast(mpnn, attacker)
        self.gal = ReferenceGAL(net, ref_attacker, LR, LAM)
        self.ds, self.train_idx, self.y, self.epoch = ds, train_idx, y.view(-1), 0
        self.alpha = ds.attributes["alpha"]
        self.molecules: dict[int, object] = {}

    def data(self, position: int):
        # The dataset's stored molecules (built once, outside the timing, as PyG's processed
        # QM9 file); the transform runs per access, inside it.
        if position not in self.molecules:
            self.molecules[position] = molecule_data(self.ds, position, self.y, self.alpha)
        return self.molecules[position]

    def prepare(self, epochs: int, count: int) -> None:
        for epoch in range(epochs):
            for ids in batch_ids(self.train_idx, epoch, count):
                for i in ids.tolist():
                    self.data(i)

    def run(self, count: int) -> list[tuple[float, float]]:
        losses = []
        for ids in batch_ids(self.train_idx, self.epoch, count):
            losses.append(self.gal.step(collate([self.data(i) for i in ids.tolist()])))
        self.epoch += 1
        return losses


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def check(ds, train_idx, y, steps: int) -> None:
    ours, theirs = GalfastRun(ds, train_idx, y), PygRun(ds, train_idx, y)
    worst = 0.0
    for step in range(steps):
        record = ours.run(1)
        a = (record["task_loss"], record["adv_loss/alpha"])
        b = theirs.run(1)[0]
        worst = max(worst, *(abs(x - z) / abs(z) for x, z in zip(a, b)))
        print(f"step {step}: galfast {a[0]:.6f} {a[1]:.4f} | PyG {b[0]:.6f} {b[1]:.4f}")
    print(f"largest relative difference {worst:.2e}")


def profile(fn) -> None:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    table = prof.key_averages().table(
        sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=44
    )
    print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impl", nargs="+", choices=("galfast", "pyg"), default=["galfast", "pyg"])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--check", type=int, default=0, metavar="STEPS")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    ds, train_idx, y = load()
    if args.check:
        check(ds, train_idx, y, args.check)
        return
    epoch_batches = -(-train_idx.numel() // BATCH)
    print(f"threads {torch.get_num_threads()}, load before {os.getloadavg()[0]:.1f}", flush=True)
    results = {}
    for impl in args.impl:
        run = (GalfastRun if impl == "galfast" else PygRun)(ds, train_idx, y)
        if impl == "pyg":
            run.prepare(3, max(args.warmup, args.batches))
        run.run(args.warmup)
        seconds = timed(lambda run=run: run.run(args.batches))
        if args.profile:
            profile(lambda run=run: run.run(args.batches))
        per_batch = seconds / args.batches
        results[impl] = per_batch
        record = {"impl": impl, "seconds": seconds, "batches": args.batches}
        record |= {"per_batch": per_batch, "epoch_estimate_s": per_batch * epoch_batches}
        print(json.dumps(record | {"load_after": os.getloadavg()[0]}), flush=True)
    if len(results) == 2:
        print(f"speed-up {results['pyg'] / results['galfast']:.2f}x over {args.batches} batches")


if __name__ == "__main__":
    main()
