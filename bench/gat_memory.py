"""Peak memory of one GAT training step (forward + backward): galfast's GATConv against PyG's.

    python bench/gat_memory.py                 # MovieLens-1M-size graph, 1 and 4 heads
    python bench/gat_memory.py --graph pubmed --heads 1 2 8

Each measurement runs in a fresh child process that builds the graph, the layer and x
(64 -> 64 channels per head, float32), runs one warm-up step (so one-time caches such as the
Graph's transpose are built), and then measures a second step:
- CPU: the rise of the process's resident set above its level just before the step, read from
  the kernel's high-water mark (VmHWM, reset through /proc/self/clear_refs; Linux >= 4.0).
  glibc is told to serve every allocation above 64 KiB with mmap and to trim freed heap
  memory (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_), so freed tensors leave the resident
  set and the warm-up step's memory does not hide the measured step's.
- CUDA: torch.cuda.max_memory_allocated() above the memory allocated before the step.
Both count everything the step allocates: PyG's per-edge tensors, galfast's [N, H, F] output,
log-sum-exp and transient [E, H] backward workspace, and the gradients.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHANNELS = 64


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def measure(impl: str, graph_name: str, heads: int, device: str) -> float:
    """Peak MiB one forward+backward step adds (runs in the child process)."""
    import torch

    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parent))
    from graphs import cora_like, movielens_like, pubmed_like

    import galfast
    from galfast.nn import GATConv

    graphs = {"cora": cora_like, "pubmed": pubmed_like, "movielens": movielens_like}
    edge_index, n = graphs[graph_name]()
    if impl == "galfast":
        layer = GATConv(CHANNELS, CHANNELS, heads=heads)
        adjacency = galfast.Graph.from_edge_index(edge_index, n).to(device)
    else:
        from torch_geometric.nn import GATConv as PygGATConv

        layer = PygGATConv(CHANNELS, CHANNELS, heads=heads)
        adjacency = edge_index.to(device)
    layer = layer.to(device)
    x = torch.randn(n, CHANNELS, device=device, requires_grad=True)

    def step():
        out = layer(x, adjacency)
        out.backward(torch.ones_like(out))
        if device == "cuda":
            torch.cuda.synchronize()

    step()
    layer.zero_grad(set_to_none=True)
    x.grad = None
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        step()
        return (torch.cuda.max_memory_allocated() - before) / 2**20
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := current VmRSS
    before = _rss_kib("VmRSS")
    step()
    return (_rss_kib("VmHWM") - before) / 1024


def _child(impl: str, graph_name: str, heads: int, device: str) -> float:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
    args = [
        sys.executable,
        __file__,
        "--child",
        impl,
        "--graph",
        graph_name,
        "--device",
        device,
        "--heads",
        str(heads),
    ]
    done = subprocess.run(args, env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["peak_mib"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", default="movielens", choices=["cora", "pubmed", "movielens"])
    parser.add_argument("--heads", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--child", choices=["galfast", "pyg"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        peak = measure(args.child, args.graph, args.heads[0], args.device)
        print(json.dumps({"peak_mib": peak}))
        return
    print(f"GAT forward+backward peak memory, {args.graph}, {args.device}, 64 -> 64 per head")
    print("| heads | galfast (MiB) | PyG (MiB) | PyG / galfast |")
    print("|---|---|---|---|")
    for heads in args.heads:
        ours = _child("galfast", args.graph, heads, args.device)
        theirs = _child("pyg", args.graph, heads, args.device)
        print(f"| {heads} | {ours:.1f} | {theirs:.1f} | {theirs / ours:.1f}x |")


if __name__ == "__main__":
    main()
