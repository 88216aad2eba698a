"""When each of the run's audit fits starts and ends, on which worker: the strong audit of
``bench/ab_audit.py`` (node and neighbour attacks, gender, seed 0, stand-in embeddings), run
once from the checkout on ``PYTHONPATH``:

    OMP_NUM_THREADS=2 PYTHONPATH=. python bench/audit_timeline.py
    OMP_NUM_THREADS=2 PYTHONPATH=. python bench/audit_timeline.py --standby

``--standby`` starts the scikit-learn worker before the dataset loads, as ``galfast run`` does
(``galfast.experiments.runner.start_audit_worker``).

Prints one line per fit (worker, start, end, seconds, what it fits) and, last, the audit's
wall and CPU time, when the first fit started and when each worker finished: the gap between
the workers' ends is the time one of them sat idle.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from galfast import ops
from galfast.audit import audit, audit_split
from galfast.audit import jobs as audit_jobs
from galfast.experiments.config import ExperimentConfig
from galfast.experiments.runner import prepare, start_audit_worker

_START = [0.0]
_RECORDS: list[tuple[str, float, float, str]] = []


def _describe(fn, args) -> str:
    name = fn.__name__
    if name == "fit_head":
        return f"{name} depth {args[0].depth} width {args[0].width} features {args[3].shape[1]}"
    if name == "fit_classic":
        return f"{name} {args[0]} features {args[2].shape[1]}"
    if name == "fit_and_predict":
        return f"{name} {args[0]}"
    return name


def _timed_call(call):
    """Jobs._call timed in the worker thread that makes it (on forked workers the thread waits
    for its process): the fit itself stays a picklable module-level call."""

    def wrapper(self, job, worker):
        start = time.perf_counter()
        try:
            return call(self, job, worker)
        finally:
            _RECORDS.append(
                (
                    f"worker {worker}",
                    start - _START[0],
                    time.perf_counter() - _START[0],
                    _describe(job.fn, job.args),
                )
            )

    return wrapper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--standby", action="store_true", help="start the worker as a run does")
    args = parser.parse_args()
    audit_jobs.Jobs._call = _timed_call(audit_jobs.Jobs._call)
    config = ExperimentConfig(
        dataset="synthetic-movielens-1m", encoder="cheb", seed=0, audit_strength="strong"
    )
    if args.standby:
        start_audit_worker(config)
    prepared = prepare(config)
    graph = prepared.dataset.graph
    gen = torch.Generator().manual_seed(0)
    features = torch.randn(graph.num_nodes, 20, generator=gen)
    z = ops.aggregate(graph, features, torch.ones(graph.num_edges), reduce="mean")
    z = z + 0.5 * torch.randn(graph.num_nodes, 20, generator=gen)
    train_idx, test_idx = audit_split(prepared.dataset.attribute_nodes, 0)
    model = torch.nn.Linear(2, 2)
    torch.optim.Adam(model.parameters())  # torch._dynamo, as after training
    _START[0], cpu = time.perf_counter(), time.process_time()
    audit(
        z, prepared.attribute, graph=graph, train_idx=train_idx, test_idx=test_idx,
        attacks=("node", "neighbor"), seeds=1, epochs=prepared.attacker_epochs, seed=0,
        strength="strong",
    )  # fmt: skip
    wall, cpu = time.perf_counter() - _START[0], time.process_time() - cpu
    ends: dict[str, float] = {}
    for worker, start, end, what in sorted(_RECORDS, key=lambda r: r[1]):
        print(f"{worker:16s} {start:6.2f} {end:6.2f} {end - start:5.2f}  {what}")
        ends[worker] = max(ends.get(worker, 0.0), end)
    first = min(r[1] for r in _RECORDS)
    finished = " ".join(f"{e:.2f}" for e in sorted(ends.values()))
    print(
        f"audit wall {wall:.2f} s, CPU {cpu:.2f} s; first fit at {first:.2f} s; workers "
        f"finished at {finished} s; load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
