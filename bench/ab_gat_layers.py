"""Same-run A/B of two galfast builds' GATConv on CPU, with PyG's GATConv in the same processes:
forward, and forward + backward (with respect to x and every parameter), at the GAT setups'
shapes (heads x features per head: GAT's 8 x 8 hidden layer, its 1 x 7 Cora and 8 x 3 PubMed
output layers, GAL's 1 x 20 MovieLens layer), 64 input channels:

    python bench/ab_gat_layers.py /tmp/before /path/to/after --rounds 5

Each argument is a checkout with an in-place build. The builds run alternately in fresh
processes, one thread each (``--threads``), and each timing is the minimum process CPU time
over all rounds; PyG runs in every process, and its minimum over all of them is shown.
Graphs: the Cora- and PubMed-size graphs of bench/graphs.py and the synthetic MovieLens-1M
graph; both libraries add the self loops.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

# Runs inside each build's checkout: prints "fwd fwd_bwd pyg_fwd pyg_fwd_bwd" (ms).
_MEASURE = """
import sys, time, warnings, torch
sys.path.insert(0, "bench")
torch.set_num_threads({threads})
warnings.filterwarnings("ignore")
import torch_geometric.nn as pyg_nn
import galfast, galfast.nn as gnn
if "{graph}" == "movielens":
    from galfast.datasets import load
    g = load("synthetic-movielens-1m").graph
    dst = torch.repeat_interleave(torch.arange(g.num_nodes), g.rowptr.diff())
    edge_index, n = torch.stack([g.col, dst]), g.num_nodes
else:
    import graphs
    edge_index, n = getattr(graphs, "{graph}_like")()
graph = galfast.Graph.from_edge_index(edge_index, n)
torch.manual_seed(0)
x = torch.randn(n, 64, requires_grad=True)
ours = gnn.GATConv(64, {features}, heads={heads})
theirs = pyg_nn.GATConv(64, {features}, heads={heads})
def best(step, reps):
    for _ in range(2):
        step()
    times = []
    for _ in range(reps):
        start = time.process_time(); step(); times.append(time.process_time() - start)
    return 1e3 * min(times)
def both(module, *args):
    def step():
        out = module(*args)
        out.backward(torch.ones_like(out))
    return step
reps = {reps}
with torch.no_grad():
    fwd = best(lambda: ours(x, graph), reps)
    pyg_fwd = best(lambda: theirs(x, edge_index), reps)
fwd_bwd = best(both(ours, x, graph), reps)
pyg_fwd_bwd = best(both(theirs, x, edge_index), reps)
print(fwd, fwd_bwd, pyg_fwd, pyg_fwd_bwd)
"""

CASES = {
    "cora": [(8, 8), (1, 7)],
    "pubmed": [(8, 8), (8, 3)],
    "movielens": [(1, 20)],
}


def measure(checkout: str, graph: str, heads: int, features: int, threads: int) -> list[float]:
    reps = 3 if graph == "movielens" else 10
    code = _MEASURE.format(graph=graph, heads=heads, features=features, threads=threads, reps=reps)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=checkout, capture_output=True, text=True, check=True
    ).stdout.split()
    return [float(v) for v in out]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--graphs", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    print("graph | heads x features | build | fwd ms | fwd+bwd ms | bwd / fwd | PyG fwd+bwd ms")
    for graph in args.graphs:
        for heads, features in CASES[graph]:
            best = {args.before: [float("inf")] * 4, args.after: [float("inf")] * 4}
            for _ in range(args.rounds):
                for checkout in (args.before, args.after):
                    times = measure(checkout, graph, heads, features, args.threads)
                    best[checkout] = [min(a, b) for a, b in zip(best[checkout], times)]
            pyg = min(best[args.before][3], best[args.after][3])
            for checkout, (fwd, fwd_bwd, _, _) in best.items():
                print(
                    f"{graph} | {heads}x{features} | {checkout} | {fwd:.2f} | {fwd_bwd:.2f} | "
                    f"{(fwd_bwd - fwd) / fwd:.2f} | {pyg:.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
