"""Turns a pytest-benchmark JSON of bench_sample_nhop.py into a markdown table of walks per
second (best round: on a shared machine noise only adds time) and how much faster galfast on
the CPU is than each peer of its group.

    python bench/walks_table.py walk.json
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def walks_table(report: dict) -> str:
    groups: dict[str, dict[str, float]] = defaultdict(dict)
    for bench in report["benchmarks"]:
        walks = bench["extra_info"]["walks"]
        groups[bench["group"]][bench["name"]] = walks / bench["stats"]["min"]
    lines = [
        "| group | implementation | walks/s | galfast-cpu speed-up over it |",
        "|---|---|---:|---:|",
    ]
    for group in sorted(groups):
        rates = groups[group]
        reference = rates.get("galfast-cpu", rates.get("galfast-cpu-paper"))
        for name, rate in sorted(rates.items(), key=lambda item: -item[1]):
            ratio = f"{reference / rate:.2f}x" if reference else "-"
            lines.append(f"| {group} | {name} | {rate:,.0f} | {ratio} |")
    return "\n".join(lines)


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(walks_table(json.load(f)))
