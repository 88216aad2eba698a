"""The `galfast run` MovieLens audit (strong, node and neighbour attacks, gender, seed 0) for
one or more galfast checkouts, alternately, each round in a fresh process:

    python bench/ab_audit.py /tmp/before . --z z.pt --rounds 3

``--backends threads processes``: each checkout's audit once per worker backend (forced where
the checkout has galfast.audit.forked_workers; ``auto`` = its default). CPU seconds count the
worker processes too.

``--z``: a saved ``[9746, D]`` embedding of synthetic-movielens-1m (for instance the run's own);
without it, 20-wide embeddings that read the rating graph (one mean aggregation of random
features, plus noise). Prints wall and CPU seconds per round and checkout, and whether every
checkout's report is the same (``workers`` picks the thread count where a checkout has it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys

_MEASURE = r"""
import importlib, inspect, json, os, resource, sys, time
import torch
from galfast.experiments.config import ExperimentConfig
from galfast.experiments.runner import prepare
from galfast.audit import audit, audit_split
from galfast import ops
cfg = ExperimentConfig(dataset="synthetic-movielens-1m", encoder="cheb", seed=0)
p = prepare(cfg)
g = p.dataset.graph
if {z!r}:
    z = torch.load({z!r})
else:
    gen = torch.Generator().manual_seed(0)
    z = ops.aggregate(g, torch.randn(g.num_nodes, 20, generator=gen), torch.ones(g.num_edges),
                      reduce="mean") + 0.5 * torch.randn(g.num_nodes, 20, generator=gen)
train_idx, test_idx = audit_split(p.dataset.attribute_nodes, 0)
kwargs = dict(graph=g, train_idx=train_idx, test_idx=test_idx, attacks=("node", "neighbor"),
              seeds=1, epochs=p.attacker_epochs, seed=0, strength="strong")
if {workers} and "workers" in inspect.signature(audit).parameters:
    kwargs["workers"] = {workers}
jobs = importlib.import_module("galfast.audit.jobs")
if {backend!r} != "auto" and hasattr(jobs, "forking_is_safe"):
    jobs.forking_is_safe = lambda: {backend!r} == "processes"
m = torch.nn.Linear(2, 2); torch.optim.Adam(m.parameters())  # torch._dynamo, as after training
def cpu_seconds():
    usage = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usage)
wall, cpu = time.perf_counter(), cpu_seconds()
report = audit(z, p.attribute, **kwargs)
wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
print(json.dumps({{"wall": wall, "cpu": cpu, "report": report.to_json(),
                  "load": os.getloadavg()[0]}}))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkouts", nargs="+")
    parser.add_argument("--z", default="")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=0, help="0: the checkout's default")
    parser.add_argument(
        "--backends", nargs="+", default=["auto"], choices=["auto", "threads", "processes"]
    )
    args = parser.parse_args()
    reports = {}
    for r in range(args.rounds):
        for checkout, backend in [(c, b) for c in args.checkouts for b in args.backends]:
            code = _MEASURE.format(z=args.z, workers=args.workers, backend=backend)
            out = subprocess.run(
                [sys.executable, "-c", code],
                cwd=checkout,
                env={"PYTHONPATH": ".", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "2"},
                capture_output=True,
                text=True,
                check=True,
            )
            result = json.loads(out.stdout.strip().splitlines()[-1])
            digest = hashlib.sha256(result["report"].encode()).hexdigest()[:12]
            reports.setdefault(checkout, set()).add(digest)
            print(
                f"round {r} {checkout} ({backend}): wall {result['wall']:.2f} s, "
                f"CPU {result['cpu']:.2f} s, load {result['load']:.1f}, report {digest}",
                flush=True,
            )
    same = len({d for ds in reports.values() for d in ds}) == 1
    print("reports identical across checkouts and rounds:", same)


if __name__ == "__main__":
    main()
