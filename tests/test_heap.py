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


def _huge_page_advice_in_a_child(argv0: str, environment: dict[str, str]) -> str:
    """In a fresh process started as `argv0`: whether the mapping of a new 8 MB tensor is advised
    MADV_HUGEPAGE (``hg`` among its VmFlags, whatever the system's THP mode)."""
    code = f"""
import re, sys
from pathlib import Path
sys.argv = [{argv0!r}]
import galfast, torch
tensor = torch.ones(8 << 20, dtype=torch.uint8)
address = tensor.data_ptr()
for entry in re.split(r"\\n(?=[0-9a-f]+-[0-9a-f]+ )", Path("/proc/self/smaps").read_text()):
    low, high = (int(x, 16) for x in entry.split()[0].split("-"))
    if low <= address < high:
        flags = re.search(r"VmFlags:(.*)", entry).group(1).split()
        print("advised" if "hg" in flags else "not advised")
"""
    env = {k: v for k, v in same_galfast_env().items() if k != "THP_MEM_ALLOC_ENABLE"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=GALFAST_PARENT,
        env=env | environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return result.stdout.strip() or result.stderr[-2000:]


linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/smaps")


@linux
def test_the_command_puts_large_tensors_on_huge_pages():
    # Large blocks are fresh mappings in the command (the 4 MB threshold): on 4 KiB pages a
    # WN18RR run took 1.75x as long, faulting them in.
    assert _huge_page_advice_in_a_child("/usr/local/bin/galfast", {}) == "advised"


@linux
def test_importing_galfast_leaves_torch_s_pages_alone():
    assert _huge_page_advice_in_a_child("script.py", {}) == "not advised"


@linux
def test_a_huge_page_setting_the_user_made_wins():
    assert (
        _huge_page_advice_in_a_child("/usr/local/bin/galfast", {"THP_MEM_ALLOC_ENABLE": "0"})
        == "not advised"
    )


def test_the_request_says_whether_torch_can_still_see_it(monkeypatch):
    monkeypatch.delenv("THP_MEM_ALLOC_ENABLE", raising=False)
    assert not heap.ask_torch_for_huge_pages()  # torch is loaded in this process
    assert heap.os.environ["THP_MEM_ALLOC_ENABLE"] == "1"
