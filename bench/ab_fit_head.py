"""Same-run A/B of one tuned attacker head's training (``galfast.audit.search.fit_head``: depth
2, width 64, a binary attribute, 3,866 fit rows of 20 features, MovieLens-audit sized) for
galfast checkouts, alternately, each round in a fresh process at one thread:

    python bench/ab_fit_head.py /tmp/before . --rounds 3

Prints the minimum CPU seconds of a fit over 7 repetitions per round and checkout, and whether
the fitted weights are the same everywhere.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

_MEASURE = r"""
import hashlib, time, torch
torch.set_num_threads(1)
from galfast.audit.search import HeadConfig, SearchConfig, fit_head
gen = torch.Generator().manual_seed(0)
x = torch.randn(4832, 20, generator=gen)
y = (x[:, 0] + torch.randn(4832, generator=gen) > 0.8).long()
config = HeadConfig(depth=2, width=64, lr=0.01, weight_decay=0.0, balanced=False)
best = float("inf")
for _ in range(7):
    start = time.process_time()
    fitted = fit_head(config, "binary", 1, x[:3866], y[:3866], x[3866:], y[3866:], seed=1,
                      search=SearchConfig())
    best = min(best, time.process_time() - start)
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes()
                                 for p in fitted.model.parameters())).hexdigest()[:12]
print(best, fitted.epochs, digest)
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkouts", nargs="+")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    digests = set()
    for r in range(args.rounds):
        for checkout in args.checkouts:
            out = subprocess.run(
                [sys.executable, "-c", _MEASURE],
                cwd=checkout,
                env={**os.environ, "PYTHONPATH": ".", "OMP_NUM_THREADS": "1"},
                capture_output=True,
                text=True,
                check=True,
            )
            seconds, epochs, digest = out.stdout.split()
            digests.add(digest)
            print(
                f"round {r} {checkout}: {1e3 * float(seconds):.1f} ms a fit ({epochs} epochs), "
                f"load {os.getloadavg()[0]:.1f}, weights {digest}",
                flush=True,
            )
    print("weights identical across checkouts and rounds:", len(digests) == 1)


if __name__ == "__main__":
    main()
