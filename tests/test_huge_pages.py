"""galfast.ops._huge_pages: CPU tensors on transparent huge pages for the walk adjacency. Large
ones start on a 2 MiB boundary of a mapping that Linux may back with huge pages; small ones, and
other platforms, get a plain tensor; the mapping lives exactly as long as the tensor."""

from __future__ import annotations

import gc
import mmap
import re
import sys
from pathlib import Path

import pytest
import torch

from galfast.ops._huge_pages import HUGE_PAGE, empty_on_huge_pages

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux madvise")


def mapping_of(address: int) -> str | None:
    """The /proc/self/smaps entry of the mapping holding `address`, or None."""
    for entry in re.split(r"\n(?=[0-9a-f]+-[0-9a-f]+ )", Path("/proc/self/smaps").read_text()):
        low, high = (int(x, 16) for x in entry.split()[0].split("-"))
        if low <= address < high:
            return entry
    return None


@pytest.mark.parametrize("dtype", [torch.uint16, torch.int32, torch.int64])
def test_small_arrays_are_plain_tensors(dtype):
    t = empty_on_huge_pages(1000, dtype)
    assert t.dtype == dtype and t.shape == (1000,) and t.device.type == "cpu"


@linux_only
@pytest.mark.parametrize("dtype", [torch.uint16, torch.int32, torch.int64])
def test_large_arrays_start_on_a_huge_page_and_hold_their_values(dtype):
    numel = HUGE_PAGE // dtype.itemsize + 12345  # over one huge page, not a multiple of one
    t = empty_on_huge_pages(numel, dtype)
    assert t.dtype == dtype and t.shape == (numel,) and t.is_contiguous()
    assert t.data_ptr() % HUGE_PAGE == 0
    values = torch.arange(numel).to(dtype)
    t.copy_(values)
    gc.collect()  # the tensor alone keeps its mapping alive
    assert torch.equal(t, values)


@linux_only
def test_the_mapping_is_advised_and_unmapped_with_the_tensor():
    t = empty_on_huge_pages(3 * HUGE_PAGE // 4, torch.int32)
    address = t.data_ptr()
    entry = mapping_of(address)
    assert entry is not None
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if thp.exists() and "[never]" not in thp.read_text():
        assert re.search(r"^THPeligible:\s+1$", entry, re.M), entry
    del t
    gc.collect()
    assert mapping_of(address) is None


@linux_only
def test_a_kernel_without_huge_pages_gets_small_pages(monkeypatch):
    """madvise fails with EINVAL where the kernel has no transparent huge pages: the tensor is
    still allocated, on small pages."""

    class NoAdvice(mmap.mmap):
        def madvise(self, *args):
            raise OSError(22, "Invalid argument")

    monkeypatch.setattr(mmap, "mmap", NoAdvice)
    t = empty_on_huge_pages(HUGE_PAGE, torch.uint8)
    t.fill_(3)
    assert t.shape == (HUGE_PAGE,) and int(t[-1]) == 3
