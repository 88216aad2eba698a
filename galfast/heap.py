"""Flat resident memory over long CPU trainings. glibc's malloc returns a freed block of over
128 KB to the system, but then raises that threshold to the block's size (up to 32 MB): from
there blocks of that size come from its heap, which a training step's mix of sizes fragments,
so the resident memory grows step after step. A CompGCN run on WN18RR (40,943 entities: 21 MB
of scores a batch) grew by 3 GB in 100 s and was killed at 12 GB of 24 (docs/benchmarks.md,
session 25). A fixed threshold of 4 MB keeps it flat, at no cost to the whole MovieLens-size
run's time; but each large block is then a fresh mapping, faulted in page by page at every
step: the WN18RR run took 1.75x as long, 1.08x with ``THP_MEM_ALLOC_ENABLE=1`` (PyTorch then
puts tensors of 2 MB and more on transparent huge pages, faulted in 2 MB at a time;
docs/benchmarks.md, session 26). PyTorch reads that variable once, at its first allocation,
which importing torch makes.

The ``galfast`` command asks for both: :func:`ask_torch_for_huge_pages` while it imports, before
torch loads (``galfast/_startup.py``), and :func:`keep_large_blocks_out_of_the_heap` before it
runs. Importing galfast changes nothing in a program's allocator: a script that trains for long
on the CPU calls :func:`keep_large_blocks_out_of_the_heap` once itself (or sets
``MALLOC_MMAP_THRESHOLD_=4194304``, which does the same) and is started with
``THP_MEM_ALLOC_ENABLE=1`` in its environment."""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["LARGE_BLOCK_BYTES", "ask_torch_for_huge_pages", "keep_large_blocks_out_of_the_heap"]

LARGE_BLOCK_BYTES = 4 << 20
_M_MMAP_THRESHOLD = -3  # glibc's malloc.h


def keep_large_blocks_out_of_the_heap() -> bool:
    """Fixes glibc's mmap threshold at ``LARGE_BLOCK_BYTES`` (4 MB) for the rest of the
    process: blocks of that size and more are then mapped afresh and returned to the system
    when freed, so a long training's resident memory stays flat. Returns whether it was set:
    not on other systems or C libraries, nor where the user set ``MALLOC_MMAP_THRESHOLD_``
    (theirs wins)."""
    if not sys.platform.startswith("linux") or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(_M_MMAP_THRESHOLD, LARGE_BLOCK_BYTES) == 1


def ask_torch_for_huge_pages() -> bool:
    """Sets ``THP_MEM_ALLOC_ENABLE=1`` unless the user set it (theirs wins), so that PyTorch's CPU
    allocator aligns tensors of 2 MB and more to 2 MB and advises them onto transparent huge
    pages. Only takes effect before torch is imported; returns whether it will."""
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    return "torch" not in sys.modules
