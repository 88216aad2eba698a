"""NNConv (and the whole MPNN) forward + backward on QM9-like batches: galfast against PyG.

    python bench/bench_nnconv.py                       # bonds and complete graphs, 1 thread
    python bench/bench_nnconv.py --threads 2 --repeats 7

Batches of 128 QM9-like molecules (bench/molecules.py: ~18 atoms and ~19 bonds each, both
directions; or complete graphs as PyG's qm9_nn_conv example builds them), x [N, 64], the
example's edge network Linear(5, 128) - ReLU - Linear(128, 64 * 64), aggr="mean". PyG's
NNConv builds the [E, 64, 64] per-edge matrices; galfast's sums h_e (x) x_u per node in its
fused kernel and multiplies by the last layer's weight once per node. Both layers have the
same weights (the state dict is copied). "mpnn" is the whole model (lin0, 3 x NNConv + GRU,
Set2Set, lin1, lin2) built from each library's layers.

Every number comes from a fresh child process per (variant, graph):
- time: median of --repeats forward + backward steps after two warm-up steps, with
  torch.set_num_threads(--threads) (galfast's kernels follow torch's thread count);
- peak memory: the rise of the resident set during one step above its level just before it
  (VmHWM reset through /proc/self/clear_refs; glibc told to mmap every allocation above
  64 KiB and to trim freed memory, so freed tensors leave the resident set), after one
  warm-up step.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DIM = 64


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _pyg_mpnn(torch, pyg_nn, in_channels: int):
    """PyG's examples/qm9_nn_conv.py Net, on PyG's layers."""
    import torch.nn.functional as F

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin0 = torch.nn.Linear(in_channels, DIM)
            edge_nn = torch.nn.Sequential(
                torch.nn.Linear(5, 128), torch.nn.ReLU(), torch.nn.Linear(128, DIM * DIM)
            )
            self.conv = pyg_nn.NNConv(DIM, DIM, edge_nn, aggr="mean")
            self.gru = torch.nn.GRU(DIM, DIM)
            self.set2set = pyg_nn.Set2Set(DIM, processing_steps=3)
            self.lin1 = torch.nn.Linear(2 * DIM, DIM)
            self.lin2 = torch.nn.Linear(DIM, 1)

        def forward(self, x, edge_index, edge_attr, batch):
            out = F.relu(self.lin0(x))
            h = out.unsqueeze(0)
            for _ in range(3):
                m = F.relu(self.conv(out, edge_index, edge_attr))
                out, h = self.gru(m.unsqueeze(0), h)
                out = out.squeeze(0)
            return self.lin2(F.relu(self.lin1(self.set2set(out, batch))))

    return Net()


def _step_function(impl: str, model: str, complete: bool):
    """A closure running one forward + backward of the variant."""
    import torch

    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parent))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch_geometric.nn as pyg_nn
    from molecules import molecule_batch

    import galfast

    torch.manual_seed(0)
    edge_index, edge_attr, batch, n = molecule_batch(128, complete=complete)
    in_channels = 11 if model == "mpnn" else DIM
    x = torch.randn(n, in_channels, requires_grad=True)
    if model == "mpnn":
        ours = galfast.models.MPNN(in_channels=in_channels, dim=DIM)
        theirs = _pyg_mpnn(torch, pyg_nn, in_channels)
    else:
        edge_nn = lambda: torch.nn.Sequential(  # noqa: E731
            torch.nn.Linear(5, 128), torch.nn.ReLU(), torch.nn.Linear(128, DIM * DIM)
        )
        ours = galfast.nn.NNConv(DIM, DIM, edge_nn(), aggr="mean")
        theirs = pyg_nn.NNConv(DIM, DIM, edge_nn(), aggr="mean")
    theirs.load_state_dict(ours.state_dict(), strict=True)
    layer = ours if impl == "galfast" else theirs
    extra = (batch,) if model == "mpnn" else ()

    def step():
        out = layer(x, edge_index, edge_attr, *extra)
        out.backward(torch.ones_like(out))
        layer.zero_grad(set_to_none=True)
        x.grad = None

    return step, n, edge_index.size(1)


def measure(impl: str, model: str, complete: bool, threads: int, repeats: int, what: str):
    """Runs in the child process: median seconds per step, or peak MiB of one step."""
    import torch

    torch.set_num_threads(threads)
    step, n, e = _step_function(impl, model, complete)
    step()
    if what == "memory":
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := current VmRSS
        before = _rss_kib("VmRSS")
        step()
        return {"peak_mib": (_rss_kib("VmHWM") - before) / 1024, "nodes": n, "edges": e}
    step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return {"seconds": statistics.median(times), "nodes": n, "edges": e}


def _child(impl, model, graph, threads, repeats, what) -> dict:
    env = dict(os.environ)
    if what == "memory":
        env.update(MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    args = [sys.executable, __file__, "--child", impl, model, graph, what]
    args += ["--threads", str(threads), "--repeats", str(repeats)]
    done = subprocess.run(args, env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--models", nargs="+", default=["nnconv", "mpnn"])
    parser.add_argument("--graphs", nargs="+", default=["bonds", "complete"])
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        impl, model, graph, what = args.child
        result = measure(impl, model, graph == "complete", args.threads, args.repeats, what)
        print(json.dumps(result))
        return
    print(f"forward + backward, 128 QM9-like molecules, F = {DIM}, {args.threads} thread(s)")
    print(
        "| model | graph | nodes | edges | PyG ms | galfast ms | speed-up | PyG MiB | "
        "galfast MiB | memory ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model in args.models:
        for graph in args.graphs:
            run = functools.partial(
                _child, model=model, graph=graph, threads=args.threads, repeats=args.repeats
            )
            ours, theirs = run("galfast", what="time"), run("pyg", what="time")
            ours_mem, theirs_mem = run("galfast", what="memory"), run("pyg", what="memory")
            print(
                f"| {model} | {graph} | {ours['nodes']} | {ours['edges']} | "
                f"{theirs['seconds'] * 1e3:.0f} | {ours['seconds'] * 1e3:.0f} | "
                f"{theirs['seconds'] / ours['seconds']:.1f}x | {theirs_mem['peak_mib']:.0f} | "
                f"{ours_mem['peak_mib']:.0f} | "
                f"{theirs_mem['peak_mib'] / max(ours_mem['peak_mib'], 1e-3):.1f}x |",
                flush=True,
            )


if __name__ == "__main__":
    main()
