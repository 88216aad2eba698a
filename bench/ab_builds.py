"""Same-run A/B of two galfast builds: the aggregation forward and forward+backward.

Each argument is a checkout with an in-place build (``python setup.py build_ext --inplace``).
The builds run alternately in fresh processes, one thread each, and the minimum CPU time over
all rounds is reported, so a loaded machine inflates both sides alike:

    python bench/ab_builds.py /tmp/before /path/to/after --features 16 64
"""

from __future__ import annotations

import argparse
import subprocess
import sys

# Runs inside each build's checkout: prints "fwd_bwd_ms fwd_ms".
_MEASURE = """
import sys, time, torch
torch.set_num_threads(1)
from galfast import Graph
from galfast.ops import aggregate
gen = torch.Generator().manual_seed(0)
num_nodes, num_edges, features = 100_000, 1_000_000, {features}
graph = Graph.from_edge_index(torch.randint(0, num_nodes, (2, num_edges), generator=gen), num_nodes)
x = torch.randn(num_nodes, features, generator=gen, requires_grad=True)
def best(step, reps=15):
    for _ in range(3):
        step()
    times = []
    for _ in range(reps):
        start = time.process_time(); step(); times.append(time.process_time() - start)
    return 1e3 * min(times)
both = best(lambda: aggregate(graph, x, norm="gcn").sum().backward())
with torch.no_grad():
    forward = best(lambda: aggregate(graph, x, norm="gcn"))
print(both, forward)
"""


def measure(checkout: str, features: int) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE.format(features=features)],
        cwd=checkout,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return float(out[0]), float(out[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--features", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for features in args.features:
        best = {args.before: [float("inf")] * 2, args.after: [float("inf")] * 2}
        for _ in range(args.rounds):
            for checkout in (args.before, args.after):
                times = measure(checkout, features)
                best[checkout] = [min(a, b) for a, b in zip(best[checkout], times)]
        for checkout, (both, forward) in best.items():
            print(f"F={features:<4d} {checkout}: fwd+bwd {both:.2f} ms, fwd {forward:.2f} ms")


if __name__ == "__main__":
    main()
