"""A GAL mini-batch run on a large synthetic graph with a planted attribute, on one process or
under torchrun: time per epoch, the training's peak memory, the audit of the embeddings.

    python bench/gal_minibatch.py --nodes 2000000 --degree 5 --batch-size 1024 --lam 10
    torchrun --nproc_per_node=2 bench/gal_minibatch.py --nodes 2000000 --degree 5 ...

The graph: ``--nodes`` nodes with a balanced binary attribute A and an independent binary task
label Y; each node links to ``--degree`` partners, of its own A with probability 0.9, then
every edge is symmetrised (about 2 x degree x nodes directed edges). Features: 3 x onehot(A),
3 x onehot(Y) and two empty columns, plus unit Gaussian noise (as tests/gal_fixtures.py). The
task is Y on ``--train-fraction`` of the nodes (an epoch is one pass over them); the adversary
reads A on the same nodes. Encoder: SAGE (mean) - tanh - SAGE - tanh - Linear, fan-outs 15 and
10. After training, rank 0 embeds every node layer by layer in chunks and runs galfast.audit
(node attacks) on ``--audit-nodes`` random other nodes. Prints one JSON line.

Peak memory: the rise of the resident set during ``fit`` above its level when fit starts
(VmHWM reset through /proc/self/clear_refs), per process: what training adds to the graph and
features already loaded.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from torch import nn

from galfast import GALTrainer, Graph, SensitiveAttribute, audit, ops
from galfast.models import AttackerMLP
from galfast.nn import SAGEConv, layer_graphs
from galfast.train import (
    Callback,
    NeighborSampling,
    NodeBatches,
    NodeHead,
    classification_loss,
    init_distributed,
)
from galfast.train.distributed import ProcessGroup


class TanhSAGE(nn.Module):
    """Two SAGE (mean) layers with tanh and a linear read-out; runs on a Graph, a mini-batch's
    blocks, or layer by layer (num_layers / input_rows / layer) for the chunked embed."""

    def __init__(self, in_dim: int, hidden: int = 32, out_dim: int = 16) -> None:
        super().__init__()
        self.convs = nn.ModuleList([SAGEConv(in_dim, hidden), SAGEConv(hidden, hidden)])
        self.out = nn.Linear(hidden, out_dim)

    num_layers = 2

    def input_rows(self, x):
        return x

    def layer(self, i, h, graph):
        h = torch.tanh(self.convs[i](h, graph))
        return self.out(h) if i == 1 else h

    def forward(self, x, graph):
        for i, g in enumerate(layer_graphs(graph, 2)):
            x = self.layer(i, x, g)
        return x


def planted_graph(num_nodes: int, degree: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randint(2, (num_nodes,), generator=gen)
    y = torch.randint(2, (num_nodes,), generator=gen)
    x = torch.zeros(num_nodes, 6)
    x[torch.arange(num_nodes), a] = 3.0
    x[torch.arange(num_nodes), 2 + y] = 3.0
    x += torch.randn(x.shape, generator=gen)
    src = torch.arange(num_nodes).repeat_interleave(degree)
    order = torch.argsort(a, stable=True)  # nodes grouped by A
    count0 = int((a == 0).sum())
    start = torch.where(a[src] == 0, 0, count0)
    size = torch.where(a[src] == 0, count0, num_nodes - count0)
    same = torch.rand(src.numel(), generator=gen) < 0.9
    own = order[start + (torch.rand(src.numel(), generator=gen) * size).long()]
    dst = torch.where(same, own, torch.randint(num_nodes, (src.numel(),), generator=gen))
    del own, same, start, size
    graph = Graph.from_edge_index(torch.stack([src, dst]), num_nodes, symmetrize=True)
    return graph, x, a, y


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(field)


class SteadyPeak(Callback):
    """After the first epoch (once fit's one-off tables exist), resets VmHWM and records the
    resident set, so the later epochs' peak rise is the steps' own working set."""

    def __init__(self) -> None:
        self.rss_kib, self.first_epoch_hwm_kib = None, 0

    def on_epoch_end(self, trainer, record) -> None:
        if self.rss_kib is None:
            self.rss_kib, self.first_epoch_hwm_kib = _rss_kib("VmRSS"), _rss_kib("VmHWM")
            Path("/proc/self/clear_refs").write_text("5")

    def rise_mib(self):
        return None if self.rss_kib is None else (_rss_kib("VmHWM") - self.rss_kib) / 1024


class Timed:
    """Wraps ops.sample_neighbors to add up its time and sampled edges."""

    def __init__(self) -> None:
        self.seconds, self.edges, self.calls = 0.0, 0, 0
        self.original = ops.sample_neighbors

    def __call__(self, *args, **kwargs):
        started = time.perf_counter()
        blocks = self.original(*args, **kwargs)
        self.seconds += time.perf_counter() - started
        self.edges += sum(b.num_edges for b in blocks)
        self.calls += 1
        return blocks


def time_gradient_averaging() -> list:
    """Adds the seconds ProcessGroup.average_gradients takes (the all_reduce) to the returned
    one-element list."""
    seconds = [0.0]
    original = ProcessGroup.average_gradients

    def timed(self, parameters):
        started = time.perf_counter()
        original(self, parameters)
        seconds[0] += time.perf_counter() - started

    ProcessGroup.average_gradients = timed
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=2_000_000)
    parser.add_argument("--degree", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--fanouts", type=int, nargs="+", default=[15, 10])
    parser.add_argument("--train-fraction", type=float, default=0.1)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lam", type=float, default=10.0)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--pretrain-epochs", type=int, default=0)
    parser.add_argument("--adv-update", choices=("separate", "joint"), default="separate")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--audit-nodes", type=int, default=30000)
    parser.add_argument("--no-audit", action="store_true")
    parser.add_argument("--checkpoint", default=None, help="write a checkpoint here at the end")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--double", action="store_true", help="float64 modules and features")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    device = init_distributed()
    group = ProcessGroup.detect()
    averaging = time_gradient_averaging()
    started = time.perf_counter()
    graph, x, a, y = planted_graph(args.nodes, args.degree, args.seed)
    build_seconds = time.perf_counter() - started
    gen = torch.Generator().manual_seed(args.seed + 1)
    order = torch.randperm(args.nodes, generator=gen)
    train = order[: int(args.train_fraction * args.nodes)].sort().values
    rest = order[train.numel() :]

    dtype = torch.float64 if args.double else torch.float32
    x = x.to(dtype)
    torch.manual_seed(args.seed)
    trainer = GALTrainer(
        TanhSAGE(x.size(1)).to(dtype),
        NodeHead(nn.Linear(16, 2)).to(dtype),
        AttackerMLP(16, 2).to(dtype),
        task_loss=classification_loss,
        lam=args.lam,
        lr=args.lr,
        pretrain_epochs=args.pretrain_epochs,
        adv_update=args.adv_update,
        adv_batch_size=args.batch_size,
        seed=args.seed,
        device=device,
        sampler=NeighborSampling(args.fanouts),
    )
    attr = SensitiveAttribute("a", "binary", a[train], index=train)
    batches = NodeBatches(train, y[train], batch_size=args.batch_size)
    timed = Timed()
    ops.sample_neighbors = timed
    rss_before = _rss_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := current VmRSS
    steady = SteadyPeak()
    trainer.fit(graph, batches, attr, epochs=args.epochs, x=x, callbacks=[steady], progress=False)
    peak_mib = (max(_rss_kib("VmHWM"), steady.first_epoch_hwm_kib) - rss_before) / 1024
    steady_mib = steady.rise_mib() if args.epochs >= 2 else None
    ops.sample_neighbors = timed.original
    if args.checkpoint:
        trainer.save_checkpoint(args.checkpoint)
    result = {
        "nodes": graph.num_nodes,
        "edges": graph.num_edges,
        "processes": group.world_size,
        "rank": group.rank,
        "threads": args.threads,
        "dtype": str(dtype),
        "batch_size": args.batch_size,
        "fanouts": args.fanouts,
        "train_nodes": train.numel(),
        "lam": args.lam,
        "adv_update": args.adv_update,
        "pretrain_epochs": args.pretrain_epochs,
        "build_seconds": round(build_seconds, 1),
        "epoch_seconds": [round(r["seconds"], 1) for r in trainer.history.to_list()],
        "task_loss": [r.get("task_loss") for r in trainer.history.to_list()],
        "adv_loss": [r.get("adv_loss/a") for r in trainer.history.to_list()],
        "steps": trainer.step,
        "sampling_seconds": round(timed.seconds, 1),
        "sampled_edges": timed.edges,
        "sample_calls": timed.calls,
        "gradient_averaging_seconds": round(averaging[0], 1),
        "fit_peak_rise_mib": round(peak_mib),
        "later_epochs_peak_rise_mib": None if steady_mib is None else round(steady_mib),
        "rss_before_fit_mib": round(rss_before / 1024),
        "encoder_params_sum": float(
            sum(p.detach().double().sum() for p in trainer.encoder.parameters())
        ),
    }
    if group.rank == 0 and not args.no_audit:
        started = time.perf_counter()
        z = trainer.embed()
        result["embed_seconds"] = round(time.perf_counter() - started, 1)
        test = rest[: args.audit_nodes]
        head = trainer.task_head.module
        result["task_accuracy"] = float((head(z[test]).argmax(1) == y[test]).float().mean())
        half = test.numel() * 2 // 3
        audited = SensitiveAttribute("a", "binary", a)
        started = time.perf_counter()
        report = audit(
            z, audited, train_idx=test[:half], test_idx=test[half:], attacks=("node",), seeds=2
        )
        worst = report.worst_case("a")
        result["audit_seconds"] = round(time.perf_counter() - started, 1)
        result["audit_macro_f1"] = round(worst.metrics["macro_f1"].mean, 3)
        result["audit_accuracy"] = round(worst.metrics["accuracy"].mean, 3)
        result["audit_baseline_macro_f1"] = round(worst.baseline["macro_f1"], 3)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
