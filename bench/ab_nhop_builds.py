"""Same-run A/B of two builds' CPU n-hop walks, call by call: 1M starts on the MovieLens-size
graph, one thread, in long-lived worker processes (a pair per build pair), the builds taking
turns on every call:

    python bench/ab_nhop_builds.py /tmp/before . --pairs 4 --rounds 5 --hops 1 2 3 4

Why pairs of workers: on the Zen 4 VM two processes of the same build walked up to 1.25x apart
at 1 hop and kept that gap over many calls (their arrays' placement in memory), so one process
per build cannot tell builds apart; each pair's best walks/s is printed, and the ratio of the
medians over the pairs. The workers check that both builds walk to the same ends.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

_WORKER = r"""
import sys, time, torch
torch.set_num_threads(1)
sys.path.insert(0, {bench!r})
from graphs import movielens_like
from galfast import Graph
from galfast.ops.sample_nhop import sample_nhop, walk_adjacency
edge_index, num_nodes = movielens_like()
g = Graph.from_edge_index(edge_index, num_nodes)
walk_adjacency(g)
starts = torch.randint(0, 6040, (1_000_000,), generator=torch.Generator().manual_seed(0))
print("ready", flush=True)
for line in sys.stdin:
    start = time.process_time()
    ends = sample_nhop(g, starts, int(line), seed=1)
    print(time.process_time() - start, int(ends.sum()), flush=True)
"""


def _start(checkout: str, code: str) -> subprocess.Popen:
    env = {"PYTHONPATH": checkout, "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    worker = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=checkout,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    if worker.stdout.readline().strip() != "ready":
        raise RuntimeError(f"the worker in {checkout} did not start")
    return worker


def _walk(worker: subprocess.Popen, hops: int) -> tuple[float, int]:
    worker.stdin.write(f"{hops}\n")
    worker.stdin.flush()
    seconds, checksum = worker.stdout.readline().split()
    return float(seconds), int(checksum)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--hops", type=int, nargs="+", default=[1, 2, 3, 4])
    args = parser.parse_args()
    code = _WORKER.format(bench=os.path.dirname(os.path.abspath(__file__)))
    pairs = [(_start(args.before, code), _start(args.after, code)) for _ in range(args.pairs)]
    for hops in args.hops:
        best = {"before": [], "after": []}
        for before, after in pairs:
            times = {"before": [], "after": []}
            _walk(before, hops), _walk(after, hops)  # warm-up
            for r in range(args.rounds):
                turn = [("before", before), ("after", after)]
                checksums = set()
                for name, worker in turn if r % 2 else turn[::-1]:
                    seconds, checksum = _walk(worker, hops)
                    times[name].append(seconds)
                    checksums.add(checksum)
                if len(checksums) != 1:
                    raise RuntimeError("the two builds walked to different ends")
            for name in best:
                best[name].append(1 / min(times[name]))
        cells = "  ".join(
            f"{name} {' '.join(f'{w:.0f}M' for w in rates)}" for name, rates in best.items()
        )
        ratio = statistics.median(best["after"]) / statistics.median(best["before"])
        print(f"hops {hops}: {cells}  after/before {ratio:.3f}", flush=True)


if __name__ == "__main__":
    main()
