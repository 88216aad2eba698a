"""The best-of-rounds timing the micro-benchmarks share: every contender runs once per round,
in turn, so a burst of load slows all of them alike; the minimum over rounds is kept."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_times(
    steps: dict[str, Callable[[], object]], rounds: int, wall: bool, warmup: int = 0
) -> dict[str, float]:
    """Each step's fastest run in seconds: wall time (several threads) or CPU time (one)."""
    clock = time.perf_counter if wall else time.process_time
    for fn in steps.values():
        for _ in range(warmup):
            fn()
    best = dict.fromkeys(steps, float("inf"))
    for _ in range(rounds):
        for name, fn in steps.items():
            start = clock()
            fn()
            best[name] = min(best[name], clock() - start)
    return best
