"""What the same-run A/B scripts share: a measurement run in a fresh process inside each
galfast checkout (its in-place build on ``PYTHONPATH``, one thread), checkouts alternating
round by round, the minimum of every timing kept."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable


def json_from_checkout(checkout: str, code: str) -> dict:
    """Runs ``python -c code`` in ``checkout`` at one thread; its last stdout line, as JSON."""
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=checkout,
        env={"PYTHONPATH": checkout, "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def alternate(
    checkouts: list[str], rounds: int, code: str, timings: Iterable[str], digits: int = 4
) -> dict[str, dict]:
    """Each round runs ``code`` in every checkout in turn and prints its result; returns each
    checkout's last result with the ``timings`` keys replaced by their minimum over rounds
    (printed last, as "best")."""
    timings = list(timings)
    best: dict[str, dict] = {}
    for _ in range(rounds):
        for checkout in checkouts:
            result = json_from_checkout(checkout, code)
            kept = best.setdefault(checkout, dict(result))
            kept.update({k: v for k, v in result.items() if k not in timings})
            for key in timings:
                kept[key] = min(kept[key], result[key])
            print(checkout, json.dumps(_rounded(result, digits)), flush=True)
    for checkout, result in best.items():
        print("best", checkout, json.dumps(_rounded(result, digits)))
    return best


def _rounded(result: dict, digits: int) -> dict:
    return {k: round(v, digits) if isinstance(v, float) else v for k, v in result.items()}
