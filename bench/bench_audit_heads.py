"""CPU time of the audit's attacker fits at one thread: four tuned heads of the strong search
(10 epochs each, no early stop) and the fixed ``mlp`` family, on a MovieLens-sized split
(3,866 fit rows of 20 features, a binary attribute). Run it from each checkout to compare:

    OMP_NUM_THREADS=1 PYTHONPATH=/tmp/before python bench/bench_audit_heads.py --rounds 5
    OMP_NUM_THREADS=1 PYTHONPATH=. python bench/bench_audit_heads.py --rounds 5

Prints the minimum over rounds of each fit's ``time.process_time`` and its time per step.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from galfast.audit.attackers import AttackerConfig, fit_and_predict
from galfast.audit.search import HeadConfig, SearchConfig, fit_head

HEADS = [
    HeadConfig(depth=2, width=64, lr=0.01, weight_decay=0.0, balanced=False),
    HeadConfig(depth=3, width=128, lr=0.003, weight_decay=1e-3, balanced=False),
    HeadConfig(depth=0, width=32, lr=0.003, weight_decay=0.0, balanced=True),
    HeadConfig(depth=1, width=256, lr=0.003, weight_decay=0.0, balanced=True),
]
EPOCHS = 10
STEPS = EPOCHS * 16  # 3,866 rows in batches of 256


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4833, 20, generator=gen)
    y = (x[:, 0] + torch.randn(4833, generator=gen) > 0.5).long()
    fit, val = slice(0, 3866), slice(3866, None)
    search = SearchConfig(max_epochs=EPOCHS, patience=EPOCHS + 1)
    names = [f"d{h.depth}w{h.width}{'b' if h.balanced else ''}" for h in HEADS] + ["mlp"]
    best = [float("inf")] * len(names)
    for _ in range(args.rounds):
        for i, head in enumerate(HEADS):
            start = time.process_time()
            fit_head(head, "binary", 1, x[fit], y[fit], x[val], y[val], seed=1, search=search)
            best[i] = min(best[i], time.process_time() - start)
        start = time.process_time()
        fit_and_predict("mlp", "binary", 1, x[fit], y[fit], x[val], seed=1, config=AttackerConfig())
        best[-1] = min(best[-1], time.process_time() - start)
    for name, seconds in zip(names, best):
        steps = STEPS if name != "mlp" else 32 * 16
        print(f"{name:8s} {seconds * 1e3:7.1f} ms  {seconds * 1e6 / steps:6.0f} us/step")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
