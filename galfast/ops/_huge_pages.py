"""CPU tensors on transparent huge pages, for the cached arrays that a kernel reads at random.

A random read over an array of several MiB misses the TLB on 4 KiB pages at nearly every access
(a Zen 4 core's L2 TLB maps 12 MiB), and in a virtual machine each miss walks two page tables.
Backed by 2 MiB pages, the same array takes a few TLB entries. NumPy asks Linux for huge pages
on its large arrays by default; torch does not (only with THP_MEM_ALLOC_ENABLE=1), so the walk
adjacency that ``sample_nhop`` builds and caches asks for them here. On a 400k-node graph whose
38 MB of ids miss every cache, 2- and 3-hop walks got about 10% more walks/s; on the
MovieLens-size graph (4 MB of 16-bit ids) they were level (docs/benchmarks.md, session 15).
"""

from __future__ import annotations

import mmap
import sys

import numpy as np
import torch
from torch import Tensor

__all__ = ["empty_on_huge_pages"]

HUGE_PAGE = 2 << 20


def _supported() -> bool:
    return sys.platform.startswith("linux") and hasattr(mmap, "MADV_HUGEPAGE")


def empty_on_huge_pages(numel: int, dtype: torch.dtype) -> Tensor:
    """An uninitialised 1-D CPU tensor of `numel` elements that starts on a 2 MiB boundary of a
    private anonymous mapping advised MADV_HUGEPAGE, so Linux may back it with huge pages (under
    the system's transparent_hugepage setting "madvise" or "always"). Below 2 MiB, or where the
    platform has no such advice, a plain ``torch.empty``. The tensor keeps its mapping alive."""
    nbytes = numel * dtype.itemsize
    if nbytes < HUGE_PAGE or not _supported():
        return torch.empty(numel, dtype=dtype)
    # Page aligned, not 2 MiB aligned: map one huge page more and start at the first boundary.
    region = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        region.madvise(mmap.MADV_HUGEPAGE)
    except OSError:  # a kernel built without transparent huge pages: EINVAL, small pages
        pass
    address = np.frombuffer(region, dtype=np.uint8, count=1).ctypes.data
    return torch.frombuffer(region, dtype=dtype, count=numel, offset=-address % HUGE_PAGE)
