"""Benchmarks run with `pytest bench/ --benchmark-only`; bench/ modules import each other."""

import ctypes
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _keep_freed_memory_in_the_heap() -> None:
    """Makes glibc serve blocks up to 32 MiB from the heap and never trim it. By default whether
    a freed output of a few megabytes goes back to the system, to be faulted in again by the
    next call, depends on the process's allocation history (its dynamic mmap threshold and the
    heap top), and the same call then measured up to 5x slower in one process than in another
    (docs/benchmarks.md, session 13); with this every implementation reuses its memory."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return  # not glibc: nothing to pin
    m_trim_threshold, m_mmap_threshold = -1, -3
    libc.mallopt(m_mmap_threshold, 32 << 20)
    libc.mallopt(m_trim_threshold, 1 << 30)


_keep_freed_memory_in_the_heap()
