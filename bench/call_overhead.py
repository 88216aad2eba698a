"""The fixed cost of one aggregation call on small graphs, against torch.sparse.mm and PyG's
GCN propagate path, for one or more galfast checkouts in the same run:

    python bench/call_overhead.py                      # this checkout
    python bench/call_overhead.py /tmp/before .        # A/B of two in-place builds

Graphs: an empty one (one node, no edge: the call's fixed cost alone), a 3-node path and a
Cora-size power-law graph (2,708 nodes, 10.5k edges); F = 16, GCN normalisation, one thread.
Each checkout runs in fresh processes, alternately, and the minimum CPU time per call over the
rounds is reported (CPU time, so that a loaded machine inflates every column alike). Passes:
``fwd`` (x needs no gradient), ``fwd(grad)`` (x requires grad, as in training) and
``fwd+bwd``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

# Runs inside a checkout; prints {"impl pass graph": microseconds}.
_MEASURE = r"""
import json, sys, time, warnings
sys.path.insert(0, {bench!r})
import torch
torch.set_num_threads(1)
from graphs import cora_like
from galfast import Graph
from galfast.ops import aggregate
from torch_geometric.nn import MessagePassing

class GCNPropagate(MessagePassing):
    def __init__(self):
        super().__init__(aggr="add")
    def forward(self, x, edge_index, edge_weight):
        return self.propagate(edge_index, x=x, edge_weight=edge_weight)
    def message(self, x_j, edge_weight):
        return edge_weight.view(-1, 1) * x_j

def per_call(fn, calls):
    for _ in range(calls // 10 + 5):
        fn()
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.process_time() - start) / calls)
    return best * 1e6

graphs = {{
    "empty": (torch.zeros(2, 0, dtype=torch.long), 1),
    "path3": (torch.tensor([[0, 1], [1, 2]]), 3),
    "cora": cora_like(),
}}
propagate = GCNPropagate()
result = {{}}
for name, (edge_index, n) in graphs.items():
    g = Graph.from_edge_index(edge_index, n)
    scale = g.degree_scale("gcn", torch.float32)
    weight = scale[g.row] * scale[g.col]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        adj = torch.sparse_csr_tensor(g.rowptr, g.col, weight, (n, n))
    ei = g.edge_index()
    x = torch.randn(n, 16)
    xg = x.clone().requires_grad_()
    grad = torch.ones(n, 16)
    impls = {{
        "galfast": lambda x: aggregate(g, x, norm="gcn"),
        "torch.sparse.mm": lambda x: torch.sparse.mm(adj, x),
        "pyg_propagate": lambda x: propagate(x, ei, weight),
    }}
    calls = 2000 if name != "cora" else 300
    for impl, fn in impls.items():
        result[f"{{impl}} fwd {{name}}"] = per_call(lambda: fn(x), calls)
        result[f"{{impl}} fwd(grad) {{name}}"] = per_call(lambda: fn(xg), calls)
        result[f"{{impl}} fwd+bwd {{name}}"] = per_call(lambda: fn(xg).backward(grad), calls)
print(json.dumps(result))
"""


def measure(checkout: str) -> dict[str, float]:
    bench = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE.format(bench=bench)],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="*", default=["."])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    best: dict[str, dict[str, float]] = {c: {} for c in args.checkouts}
    for _ in range(args.rounds):
        for checkout in args.checkouts:
            for key, value in measure(checkout).items():
                best[checkout][key] = min(value, best[checkout].get(key, float("inf")))
    keys = list(best[args.checkouts[0]])
    print("| call | " + " | ".join(args.checkouts) + " |")
    print("|---|" + "---|" * len(args.checkouts))
    for key in keys:
        impl = key.split()[0]
        if impl != "galfast" and len(args.checkouts) > 1:
            cells = [f"{min(best[c][key] for c in args.checkouts):.1f} us"] * len(args.checkouts)
        else:
            cells = [f"{best[c][key]:.1f} us" for c in args.checkouts]
        print(f"| {key} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
