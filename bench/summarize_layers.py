"""Turns a pytest-benchmark JSON of bench_layers.py into the markdown table of docs/benchmarks.md
("GNN layers: galfast.nn against PyG"): per layer, graph and pass, the minimum time of galfast
and of each PyG input, and galfast's speed-up over PyG's fastest.

    pytest bench/bench_layers.py --benchmark-only --benchmark-json=layers.json
    python bench/summarize_layers.py layers.json
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def main(path: str) -> None:
    runs = json.load(open(path))["benchmarks"]
    table: dict[tuple, dict[str, float]] = defaultdict(dict)
    for run in runs:
        params = run["params"]
        key = (params["device"], params["layer"], params["graph_name"], params["pass_"])
        table[key][params["impl"]] = run["stats"]["min"] * 1e3
    print(
        "| device | layer | graph | pass | galfast (ms) | PyG edge_index (ms) "
        "| PyG CSR adj_t (ms) | speed-up vs PyG's fastest |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for (device, layer, graph, pass_), times in table.items():
        peers = {k: v for k, v in times.items() if k != "galfast"}
        fastest = min(peers.values())
        cells = [f"{times[k]:.1f}" if k in times else "-" for k in ("pyg_edge_index", "pyg_csr")]
        print(
            f"| {device} | {layer} | {graph} | {pass_} | {times['galfast']:.1f} | "
            f"{' | '.join(cells)} | {fastest / times['galfast']:.1f}x |"
        )


if __name__ == "__main__":
    main(sys.argv[1])
