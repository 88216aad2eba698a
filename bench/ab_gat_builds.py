"""Same-run A/B of two galfast builds: the fused GAT kernel (``galfast.ops.gat_aggregate``)
forward, and forward + backward, on CPU.

Each argument is a checkout with an in-place build (``python setup.py build_ext --inplace``).
The builds run alternately in fresh processes, one thread each, and the minimum CPU time over
all rounds is reported, so a loaded machine inflates both sides alike:

    python bench/ab_gat_builds.py /tmp/before /path/to/after --graphs cora pubmed

Shapes: 4 heads of 16 features (GATConv(64, 16, heads=4)) and 1 head of 64, on the Cora- and
PubMed-size graphs of bench/graphs.py with one self loop per node (as GATConv adds them);
``+edge`` adds the per-edge logit term of GATConv(edge_dim=...) and its gradient.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

# Runs inside each build's checkout: prints "fwd_bwd_ms fwd_ms".
_MEASURE = """
import sys, time, torch
sys.path.insert(0, "bench")
torch.set_num_threads(1)
import graphs
from galfast import Graph
from galfast.ops import gat_aggregate
edge_index, n = graphs.{graph}_like()
loops = torch.arange(n)
edge_index = torch.cat([edge_index, torch.stack([loops, loops])], 1)
graph = Graph.from_edge_index(edge_index, n)
gen = torch.Generator().manual_seed(0)
heads, features = {heads}, {features}
h = torch.randn(n, heads, features, generator=gen, requires_grad=True)
a_src = torch.randn(n, heads, generator=gen, requires_grad=True)
a_dst = torch.randn(n, heads, generator=gen, requires_grad=True)
a_edge = torch.randn(graph.num_edges, heads, generator=gen, requires_grad=True) if {edge} else None
upstream = torch.randn(n, heads, features, generator=gen)
def best(step, reps=15):
    for _ in range(3):
        step()
    times = []
    for _ in range(reps):
        start = time.process_time(); step(); times.append(time.process_time() - start)
    return 1e3 * min(times)
both = best(lambda: (gat_aggregate(graph, h, a_src, a_dst, a_edge) * upstream).sum().backward())
with torch.no_grad():
    forward = best(lambda: gat_aggregate(graph, h, a_src, a_dst, a_edge))
print(both, forward)
"""

SHAPES = {"h4x16": (4, 16), "h1x64": (1, 64)}


def measure(checkout: str, graph: str, shape: str, edge: bool) -> tuple[float, float]:
    heads, features = SHAPES[shape]
    code = _MEASURE.format(graph=graph, heads=heads, features=features, edge=edge)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=checkout, capture_output=True, text=True, check=True
    ).stdout.split()
    return float(out[0]), float(out[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--graphs", nargs="+", default=["cora", "pubmed"])
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print("case | build | fwd+bwd ms | fwd ms | bwd ms (difference) | bwd / fwd")
    for graph in args.graphs:
        for shape in args.shapes:
            for edge in (False, True):
                best = {args.before: [float("inf")] * 2, args.after: [float("inf")] * 2}
                for _ in range(args.rounds):
                    for checkout in (args.before, args.after):
                        times = measure(checkout, graph, shape, edge)
                        best[checkout] = [min(a, b) for a, b in zip(best[checkout], times)]
                case = f"{graph} {shape}{' +edge' if edge else ''}"
                for checkout, (both, forward) in best.items():
                    backward = both - forward
                    print(
                        f"{case} | {checkout} | {both:.2f} | {forward:.2f} | {backward:.2f} | "
                        f"{backward / forward:.2f}"
                    )


if __name__ == "__main__":
    main()
