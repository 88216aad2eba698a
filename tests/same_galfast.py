"""Subprocesses that import the galfast this test run imports: the installed package in CI
(from a checkout, `python -c` would otherwise pick up the unbuilt source tree first), the
in-place build during development."""

from __future__ import annotations

import os
import subprocess
import sys

import galfast

# The folder holding the galfast package that this process imported.
GALFAST_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(galfast.__file__)))


def same_galfast_env() -> dict[str, str]:
    """The environment for a subprocess run with ``cwd=GALFAST_PARENT``."""
    path = [GALFAST_PARENT, os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}


def run_python(code: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -c code`` on this run's galfast, its output captured as text; a process that
    fails shows its stderr in the assertion (a hang fails on ``timeout`` seconds)."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=GALFAST_PARENT,
        env=same_galfast_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr
    return done
