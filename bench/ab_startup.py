"""Same-run A/B of what a command costs before it works, and of the whole MovieLens run, for
galfast checkouts (each with an in-place build), alternately, each in a fresh process:

    python bench/ab_startup.py /tmp/before . --rounds 5            # import galfast, --help
    python bench/ab_startup.py /tmp/before . --rounds 2 --run      # + the whole `galfast run`

Prints per checkout the minimum wall and CPU seconds (the process and its children) over the
rounds, and the load beside them. ``--run`` runs ``galfast run --dataset
synthetic-movielens-1m --encoder cheb --seeds 1`` and checks that every checkout's record is
the same apart from its timings.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

COMMANDS = {
    "import galfast": ["-c", "import galfast"],
    "galfast --help": ["-m", "galfast", "--help"],
}
RUN = [
    "-m", "galfast", "run", "--dataset", "synthetic-movielens-1m", "--encoder", "cheb",
    "--seeds", "1", "--quiet", "--out",
]  # fmt: skip


def timed(checkout: str, args: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of ``python args`` run in ``checkout``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, *args],
        cwd=checkout,
        env={**os.environ, "PYTHONPATH": "."},
        check=True,
        stdout=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _without_timings(value):
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if "second" not in k}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkouts", nargs="+")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--run", action="store_true", help="also the whole galfast run")
    args = parser.parse_args()
    best: dict[tuple[str, str], tuple[float, float]] = {}
    records: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, command in COMMANDS.items():
                for checkout in args.checkouts:
                    wall, cpu = timed(checkout, command)
                    old = best.get((name, checkout), (float("inf"),) * 2)
                    best[(name, checkout)] = (min(old[0], wall), min(old[1], cpu))
            if not args.run:
                continue
            for i, checkout in enumerate(args.checkouts):
                out = os.path.join(tmp, f"run{i}.json")
                wall, cpu = timed(checkout, [*RUN, out])
                print(
                    f"round {r} {checkout}: whole run wall {wall:.1f} s, CPU {cpu:.1f} s, "
                    f"load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
                old = best.get(("whole run", checkout), (float("inf"),) * 2)
                best[("whole run", checkout)] = (min(old[0], wall), min(old[1], cpu))
                with open(out) as f:
                    record = json.dumps(_without_timings(json.load(f)), sort_keys=True)
                records.setdefault(checkout, record)
                if records[checkout] != record:
                    print(f"  {checkout}: the record differs from its round 0")
    for (name, checkout), (wall, cpu) in best.items():
        print(f"{name:15s} {checkout}: min wall {wall:.2f} s, min CPU {cpu:.2f} s")
    if records:
        same = len(set(records.values())) == 1
        print("records identical across checkouts (timings aside):", same)
    print(f"load now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
