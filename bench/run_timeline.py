"""When each phase of a whole ``galfast run`` starts and ends, in wall seconds from the start of
the process: the imports, the audit workers' fork, the dataset, CUDA's start, the training, the
move of the embeddings to the CPU and the audit (no profiler, so the times are the real ones):

    python bench/run_timeline.py -- run --dataset synthetic-movielens-1m --encoder cheb \
        --seeds 1 --device cuda --quiet

The phases are timed by wrapping the functions that run them (``prepare``, ``_audit_one``,
``start_audit_worker``, ``run_experiment`` and torch's CUDA start), so the command itself is
unchanged.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections import Counter

_START = time.perf_counter()
_EVENTS: list[tuple[str, float, float, str]] = []
_STARTED: set[str] = set()


def _timed(owner, name: str, label: str, once: bool = False) -> None:
    """Replaces ``owner.name`` with a wrapper recording when each call (or the first) runs."""
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if once and label in _STARTED:  # a later or a nested call
            return original(*args, **kwargs)
        _STARTED.add(label)
        before = set(sys.modules)
        begin = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            end = time.perf_counter()
            imported = _packages(set(sys.modules) - before)
            _EVENTS.append((label, begin - _START, end - _START, imported))

    setattr(owner, name, wrapper)


def _packages(modules: set[str]) -> str:
    """The modules imported during a phase: how many, and the packages most of them are in."""
    if not modules:
        return ""
    counts = Counter(".".join(name.split(".")[:2]) for name in modules)
    top = ", ".join(f"{name} {count}" for name, count in counts.most_common(4))
    return f"{len(modules)} modules imported ({top})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("argv", nargs=argparse.REMAINDER, help="the galfast command line")
    argv = parser.parse_args().argv
    argv = argv[1:] if argv[:1] == ["--"] else argv

    import torch

    imported_torch = time.perf_counter() - _START
    import galfast.cli
    from galfast.cli import options as cli_options
    from galfast.cli import run as cli_run
    from galfast.experiments import runner

    imported = time.perf_counter() - _START
    _timed(cli_options, "prepare", "dataset and setup")
    _timed(runner, "_audit_one", "audit")
    _timed(cli_run, "start_audit_worker", "fork audit workers")
    _timed(torch.cuda, "_lazy_init", "CUDA start", once=True)
    _timed(cli_run, "run_experiment", "run_experiment")
    status = galfast.cli.main(argv)
    end = time.perf_counter() - _START
    print(f"{'phase':<22} {'start':>7} {'end':>7} {'seconds':>8}")
    rows = [
        ("import torch", 0.0, imported_torch, ""),
        ("import galfast", imported_torch, imported, ""),
    ]
    rows += sorted(_EVENTS, key=lambda event: event[1])
    spans = {label: (begin, finish) for label, begin, finish, _ in _EVENTS}
    if "dataset and setup" in spans and "audit" in spans:
        between = (spans["dataset and setup"][1], spans["audit"][0])
        rows.append(("training (between)", *between, ""))
    for label, begin, finish, imported in rows:
        print(f"{label:<22} {begin:7.2f} {finish:7.2f} {finish - begin:8.2f}  {imported}")
    print(f"whole command: {end:.2f} s, status {status}")


if __name__ == "__main__":
    main()
