"""galfast.keep_large_blocks_out_of_the_heap fixes glibc's mmap threshold, so a long training's
resident memory stays flat (a WN18RR run grew by gigabytes and was killed); a user's own
MALLOC_MMAP_THRESHOLD_ wins. The ``galfast`` command calls it before it runs; importing
galfast does not."""

from __future__ import annotations

import ctypes
import platform
import subprocess
import sys

import pytest
from same_galfast import GALFAST_PARENT, same_galfast_env

import galfast.cli
from galfast import heap

glibc = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="glibc's mallopt",
)


class _Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, *args):
        self.calls.append(args)
        return 1


@glibc
def test_the_threshold_is_fixed_at_4_mb(monkeypatch):
    recorder = _Recorder()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: type("C", (), {"mallopt": recorder})())
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    assert heap.keep_large_blocks_out_of_the_heap()
    assert recorder.calls == [(-3, 4 * 1024 * 1024)]


def test_a_threshold_the_user_set_wins(monkeypatch):
    recorder = _Recorder()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: type("C", (), {"mallopt": recorder})())
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert not heap.keep_large_blocks_out_of_the_heap()
    assert recorder.calls == []


@glibc
def test_the_real_mallopt_takes_it():
    # In a child: the threshold stays fixed for the rest of the process.
    code = "import galfast; print(galfast.keep_large_blocks_out_of_the_heap())"
    env = {k: v for k, v in same_galfast_env().items() if k != "MALLOC_MMAP_THRESHOLD_"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=GALFAST_PARENT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.stdout.strip() == "True", result.stderr[-2000:]


def test_the_command_sets_it_before_it_runs(monkeypatch):
    order = []
    monkeypatch.setattr(galfast.cli, "keep_large_blocks_out_of_the_heap", lambda: order.append(1))
    monkeypatch.setattr(galfast.cli, "main", lambda: order.append(2) or 0)
    monkeypatch.setattr(galfast.cli, "_teardown_needed", lambda: True)
    with pytest.raises(SystemExit):
        galfast.cli.run_and_exit()
    assert order == [1, 2]
