"""Same-run A/B of galfast builds on the MovieLens training step (the CLI's
``galfast run --dataset synthetic-movielens-1m --encoder cheb``, training only).

Each argument is a checkout with an in-place build (``python setup.py build_ext --inplace``).
The builds run alternately in fresh processes at one thread; each process trains the
experiment's own setup (galfast.experiments.movielens) for ``--epochs`` epochs and reports the
CPU time of its first epoch (which builds the per-graph caches) and the median and minimum CPU
time from one task step to the next (the step, its batch, the loop) in the later epochs. The
minimum of each over all rounds is reported, so a loaded machine inflates both sides alike:

    python bench/ab_movielens_step.py /tmp/before /path/to/after --encoder cheb --rounds 3
"""

from __future__ import annotations

import argparse

from checkout_runs import alternate

# Runs inside each build's checkout: prints one JSON line.
_MEASURE = """
import json, time, torch
torch.set_num_threads(1)
from galfast.experiments import runner
from galfast.experiments.config import ExperimentConfig
import galfast.experiments.movielens as movielens
from galfast.train.trainer import GALTrainer
cfg = ExperimentConfig(dataset="synthetic-movielens-1m", encoder="{encoder}")
prepared = runner.prepare(cfg)
epochs, steps = [], []
run_epoch, task_step = GALTrainer._run_epoch, GALTrainer._task_step
def timed_epoch(self, *args):
    start = time.process_time()
    record = run_epoch(self, *args)
    epochs.append(time.process_time() - start)
    return record
last = [None]
def timed_step(self, *args):
    # From one step's start to the next one's in the same epoch: the step, its batch and
    # the loop. The first epoch builds the per-graph caches: not counted.
    now = time.process_time()
    if last[0] is not None and last[0][0] == len(epochs) > 0:
        steps.append(now - last[0][1])
    last[0] = (len(epochs), now)
    return task_step(self, *args)
GALTrainer._run_epoch, GALTrainer._task_step = timed_epoch, timed_step
torch.manual_seed(cfg.seed)  # as the runner does: the modules' initial weights
start = time.process_time()
_, metrics = movielens.train(cfg, prepared.dataset, prepared.attributes, {epochs}, False)
total = time.process_time() - start
steps.sort()
print(json.dumps(dict(first_epoch_s=epochs[0], step_ms=1e3 * steps[len(steps) // 2],
                      step_min_ms=1e3 * steps[0], train_s=total, rmse=metrics["rmse"])))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkouts", nargs="+")
    parser.add_argument("--encoder", default="cheb")
    parser.add_argument("--epochs", type=int, default=3, help="per process (>= 2)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    code = _MEASURE.format(encoder=args.encoder, epochs=max(args.epochs, 2))
    alternate(
        args.checkouts, args.rounds, code, ("first_epoch_s", "step_ms", "step_min_ms", "train_s")
    )


if __name__ == "__main__":
    main()
