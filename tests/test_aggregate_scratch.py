"""The CPU sum's pre-scaled copy of x (GCN's column scale folded in) lives in scratch memory kept
across calls: allocated per call, a large copy went back to the system on every free and was
faulted in again on the next call (a call 5-7x slower on a VM; docs/benchmarks.md)."""

import platform
import textwrap

import pytest
from same_galfast import run_python

# Runs in a fresh process whose malloc hands every block over 64 KiB to mmap and back (as glibc
# does by default until its threshold adapts, and again whenever the heap is trimmed), then
# counts the page faults of repeated kernel calls with the output allocated once.
_FAULTS_PER_CALL = textwrap.dedent(
    """
    import ctypes, resource, torch
    libc = ctypes.CDLL("libc.so.6")
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    assert libc.mallopt(M_MMAP_THRESHOLD, 64 * 1024) and libc.mallopt(M_TRIM_THRESHOLD, 0)
    torch.set_num_threads(1)
    from galfast import Graph
    from galfast.ops.aggregate import _SUM, int32_index, launch_aggregate
    n, degree = 4000, 40  # over 32 edges per source: col_scale is folded into a copy
    src = torch.arange(n).repeat_interleave(degree)
    dst = torch.randint(0, n, (n * degree,), generator=torch.Generator().manual_seed(0))
    g = Graph.from_edge_index(torch.stack([src, dst]), n)
    x = torch.randn(n, {features}, dtype=torch.{dtype})
    scale = g.degree_scale("gcn", x.dtype)
    col32 = int32_index(g, "col", g.col)
    empty = g.rowptr.new_empty(0)
    def call():
        return launch_aggregate(g.rowptr, g.col, col32, None, None, scale, scale, empty, None,
                                x, None, _SUM)[0]
    first = call()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        call()
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20
    copy_pages = x.numel() * x.element_size() // 4096
    # the output's own pages are faulted in on every call here too; the copy's must not be
    print(faults, copy_pages, bool(torch.equal(first, call())))
    """
)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="needs glibc's mallopt")
@pytest.mark.parametrize("features,dtype", [(16, "float32"), (20, "float32"), (20, "float64")])
def test_the_folded_copy_is_not_faulted_in_on_every_call(features, dtype):
    script = _FAULTS_PER_CALL.format(features=features, dtype=dtype)
    result = run_python(script, timeout=120)
    faults, copy_pages, same = result.stdout.split()
    faults, copy_pages = float(faults), int(copy_pages)
    assert same == "True"
    # The output alone costs about copy_pages faults a call under this malloc; a copy
    # allocated per call would double that.
    assert faults < 1.5 * copy_pages, (faults, copy_pages)
