"""Where the CPU GAT backward's time goes: the forward, the whole backward and each backward
pass alone, per graph and shape, timed by a small C++ program (bench/gat_passes.cpp) compiled
against this checkout's kernel (its AVX2 build), so no Python or autograd cost is counted:

    python bench/gat_backward_passes.py --graphs cora pubmed movielens --threads 1 2

Graphs: the Cora- and PubMed-size graphs of bench/graphs.py and the synthetic MovieLens-1M
graph (``galfast.datasets.load("synthetic-movielens-1m")``), each with one self loop per
node as GATConv adds them. Shapes are the papers' GAT layers (heads x features per head).
Each timing is the minimum over ``--rounds`` runs of the process CPU time and of the wall
time (they differ only with several threads). ``--before CHECKOUT`` also builds that
checkout's copy of the harness against its own kernel and runs the two alternately,
``--repeats`` times per case, so load from other processes hits both alike:

    python bench/gat_backward_passes.py --before /tmp/galfast-before --threads 1 2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from galfast import Graph  # noqa: E402

# GAT (Velickovic et al.): 8 heads x 8 hidden, Cora's output 1 x 7, PubMed's output 8 x 3;
# GAL's encoders: one head, Planetoid 128 then 64, MovieLens 20.
SHAPES = {
    "cora": [(8, 8), (1, 7), (1, 128), (1, 64)],
    "pubmed": [(8, 8), (8, 3), (1, 128), (1, 64)],
    "movielens": [(1, 20), (8, 8)],
}


def looped_graph(name: str) -> Graph:
    if name == "movielens":
        from galfast.datasets import load

        graph = load("synthetic-movielens-1m").graph
        dst = torch.repeat_interleave(torch.arange(graph.num_nodes), graph.rowptr.diff())
        edge_index, n = torch.stack([graph.col, dst]), graph.num_nodes
    else:
        import graphs

        edge_index, n = getattr(graphs, f"{name}_like")()
    loops = torch.arange(n)
    return Graph.from_edge_index(torch.cat([edge_index, torch.stack([loops, loops])], 1), n)


def dump(graph: Graph, folder: Path) -> None:
    csc = graph.csc
    arrays = {
        "rowptr": graph.rowptr,
        "col": graph.col,
        "colptr": csc.colptr,
        "csc_row": csc.row,
        "csc_edge_id": csc.edge_id,
        "csr_to_csc": graph.csc_slot,
    }
    for name, tensor in arrays.items():
        tensor.to(torch.int64).contiguous().numpy().tofile(folder / name)


def build(checkout: Path, exe: Path) -> Path:
    source = checkout / "bench" / "gat_passes.cpp"
    subprocess.run(
        ["g++", "-O3", "-fno-trapping-math", "-mavx2", "-mfma", "-fopenmp", "-std=c++17"]
        + ["-I", str(checkout / "csrc"), str(source), "-o", str(exe)],
        check=True,
    )
    return exe


def run(exe: Path, work: Path, sizes: list[int], threads: int, rounds: int) -> dict[str, float]:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), ROUNDS=str(rounds))
    out = subprocess.run(
        [str(exe), str(work), *map(str, sizes)], env=env, capture_output=True, text=True, check=True
    ).stdout
    times = {}
    for line in out.split("\n"):
        if line:
            timing, cpu, wall = line.split()
            times[timing] = (float(cpu), float(wall))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--threads", nargs="+", type=int, default=[1])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--before", type=Path, help="another checkout to time alternately")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        builds = {"after" if args.before else "this": build(ROOT, work / "gat_passes")}
        if args.before:
            builds = {"before": build(args.before, work / "gat_passes_before"), **builds}
        print("graph | shape | threads | build | timing | cpu ms | wall ms")
        for name in args.graphs:
            graph = looped_graph(name)
            dump(graph, work)
            sizes = [graph.num_nodes, graph.num_edges]
            for heads, features in SHAPES[name]:
                for threads in args.threads:
                    best: dict[str, dict[str, tuple[float, float]]] = {b: {} for b in builds}
                    for _ in range(args.repeats if args.before else 1):
                        for label, exe in builds.items():
                            times = run(exe, work, [*sizes, heads, features], threads, args.rounds)
                            for timing, (cpu, wall) in times.items():
                                old = best[label].get(timing, (float("inf"),) * 2)
                                best[label][timing] = (min(old[0], cpu), min(old[1], wall))
                    for label, times in best.items():
                        for timing, (cpu, wall) in times.items():
                            print(
                                f"{name} | {heads}x{features} | {threads} | {label} | {timing} | "
                                f"{cpu:.3f} | {wall:.3f}",
                                flush=True,
                            )


if __name__ == "__main__":
    main()
