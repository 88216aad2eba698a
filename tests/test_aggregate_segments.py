"""The CUDA sum's segment plan (galfast/ops/segment_plan.py) and the segment kernel it drives
(csrc/aggregate/aggregate_sum_cuda.cu), against a plain-PyTorch reference. The plan tests run
on the CPU; the kernel tests need a GPU."""

import pytest
import torch
from graphs import awkward_graphs, random_edges
from ref_aggregate import aggregate_ref

from galfast import Graph
from galfast._native import _C
from galfast.ops import aggregate
from galfast.ops.aggregate import int32_index, launch_aggregate
from galfast.ops.segment_plan import build_segment_plan, num_segments, segment_edges

_SUM = int(_C.AggMode.SUM)


def unpack(plan, num_rows):
    s = num_segments(plan, num_rows)
    return plan[: s + 1], plan[s + 1 : 2 * s + 1], plan[2 * s + 1 :]


@pytest.mark.parametrize("name", list(awkward_graphs()))
@pytest.mark.parametrize("seg_edges", [1, 2, 3, 32, 5000])
def test_plan_tiles_every_row_in_order(name, seg_edges):
    edge_index, n = awkward_graphs()[name]
    g = Graph.from_edge_index(edge_index, n)
    plan = build_segment_plan(g.rowptr, seg_edges)
    begin, seg_row, row_seg_ptr = unpack(plan, n)
    assert plan.dtype == torch.long and len(row_seg_ptr) == n + 1
    assert begin[0] == 0 and begin[-1] == g.num_edges
    assert torch.all(begin.diff() >= 0) and torch.all(begin.diff() <= seg_edges)
    counts = row_seg_ptr.diff()
    assert torch.all(counts >= 1)  # every row has a segment, an empty row an empty one
    assert torch.equal(seg_row, torch.repeat_interleave(torch.arange(n), counts))
    # Each row's segments cover exactly its edges, in order.
    assert torch.equal(begin[row_seg_ptr[:-1]], g.rowptr[:-1])
    assert torch.equal(begin[row_seg_ptr[1:]], g.rowptr[1:])
    degree = g.rowptr.diff()
    assert torch.equal(counts, ((degree + seg_edges - 1) // seg_edges).clamp_min(1))


def test_plan_rejects_a_non_positive_length():
    g = Graph.from_edge_index(random_edges(5, 10, seed=0), 5)
    with pytest.raises(ValueError, match="seg_edges must be positive"):
        build_segment_plan(g.rowptr, 0)


# ---------------------------------------------------------------- the kernel (GPU)
def launch_with_plan(g, x, seg_edges, weight=None, scale=None):
    """The segment kernel on g's CSR with a plan of the given segment length."""
    col32 = int32_index(g, "col", g.col)
    plan = build_segment_plan(g.rowptr, seg_edges)
    empty = g.rowptr.new_empty(0)
    args = (g.rowptr, g.col, col32, None, weight, scale, scale, empty, plan, x, None, _SUM)
    return launch_aggregate(*args)[0]


GRAPHS = {**awkward_graphs(), "big": (random_edges(500, 20000, seed=3), 500)}


@pytest.mark.cuda
@pytest.mark.parametrize("name", list(GRAPHS))
@pytest.mark.parametrize("seg_edges", [1, 3, 32, 256])
@pytest.mark.parametrize("f", [1, 3, 4, 8, 20, 64, 128, 136])
def test_kernel_matches_reference_float64(name, seg_edges, f):
    # f covers the lane groups of 4, 8, 16 and 32 (2 doubles a vector), odd F on the scalar
    # path, and F above one 32-lane tile; seg_edges 1 and 3 split nearly every row.
    edge_index, n = GRAPHS[name]
    gen = torch.Generator().manual_seed(f + seg_edges)
    weight = torch.rand(edge_index.size(1), generator=gen, dtype=torch.float64) + 0.5
    g = Graph.from_edge_index(edge_index, n, weight).to("cuda")
    x = torch.randn(n, f, generator=gen, dtype=torch.float64).cuda()
    scale = g.degree_scale("gcn", torch.float64)
    got = launch_with_plan(g, x, seg_edges, g.edge_weight, scale)
    want = aggregate_ref(n, g.col, g.row, x, g.edge_weight, "sum", "gcn")
    torch.testing.assert_close(got, want)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("f", [5, 8, 16, 24, 64, 128, 264])
def test_kernel_low_precision_and_vector_widths(dtype, f):
    # 16-byte vectors hold 4 floats or 8 halves: F = 8, 16, 24, 64, 128 take them where the
    # width divides F, the others the one-element path. Accumulation is in float32.
    edge_index, n = GRAPHS["hub"]
    g = Graph.from_edge_index(edge_index, n).to("cuda")
    x = torch.randn(n, f, device="cuda").to(dtype)
    got = launch_with_plan(g, x, 64)
    want = aggregate_ref(n, g.col, g.row, x.double(), None, "sum", None)
    tol = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 1e-1}[dtype]
    torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol * 10)


@pytest.mark.cuda
def test_kernel_misaligned_x_takes_the_element_path():
    # A row view one float past a 16-byte boundary: the vector loads would fault there.
    edge_index, n = GRAPHS["big"]
    g = Graph.from_edge_index(edge_index, n).to("cuda")
    storage = torch.randn(n * 16 + 1, device="cuda")
    x = storage[1:].view(n, 16)
    assert x.data_ptr() % 16 != 0
    got = launch_with_plan(g, x, 32)
    want = aggregate_ref(n, g.col, g.row, x.double(), None, "sum", None)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-4)


@pytest.mark.cuda
def test_kernel_is_deterministic():
    edge_index, n = GRAPHS["hub"]
    g = Graph.from_edge_index(edge_index, n).to("cuda")
    x = torch.randn(n, 20, device="cuda")
    first = launch_with_plan(g, x, 8)
    for _ in range(5):
        assert torch.equal(launch_with_plan(g, x, 8), first)


@pytest.mark.cuda
def test_op_backward_through_plans_matches_reference():
    # The op's own plans (the device's segment length) forward and, on the transpose, backward.
    edge_index = torch.cat([random_edges(3000, 60000, seed=7), GRAPHS["hub"][0]], 1)
    g = Graph.from_edge_index(edge_index, 3001).to("cuda")
    x = torch.randn(3001, 20, device="cuda", dtype=torch.float64, requires_grad=True)
    w = torch.rand(g.num_edges, device="cuda", dtype=torch.float64, requires_grad=True)
    out = aggregate(g, x, w, norm="gcn")
    grad = torch.randn_like(out)
    gx, gw = torch.autograd.grad(out, (x, w), grad)
    xr, wr = x.detach().requires_grad_(), w.detach().requires_grad_()
    ref = aggregate_ref(3001, g.col, g.row, xr, wr, "sum", "gcn")
    rx, rw = torch.autograd.grad(ref, (xr, wr), grad)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(gx, rx)
    torch.testing.assert_close(gw, rw)


@pytest.mark.cuda
def test_segment_length_is_a_bounded_power_of_two():
    device = torch.device("cuda")
    lengths = [segment_edges(e, device) for e in (0, 1000, 10**6, 10**8, 10**11)]
    assert lengths == sorted(lengths) and lengths[0] == 32 and lengths[-1] == 4096
    assert all(length & (length - 1) == 0 for length in lengths)


# ---------------------------------------------------------------- the op's graph inputs
@pytest.mark.parametrize("mode", ["sum", "max"])
def test_cuda_inputs_hold_a_plan_for_the_sum_and_hub_rows_otherwise(monkeypatch, mode):
    """What apply_aggregate hands the CUDA kernels, per direction (checked on a CPU graph with
    the GPU's size query stubbed): a sum gets its int32 copy and plan and no hub list (listing
    hubs syncs with the GPU, and the segment kernel reads none); max, which has no int32 copy,
    gets the hub rows and no plan."""
    import galfast.ops.segment_plan as segment_plan_module
    from galfast.ops.aggregate import _csr_tensors, _graph_tensors

    monkeypatch.setattr(segment_plan_module, "_warp_slots", lambda device_index: 4)
    edge_index, n = awkward_graphs()["hub"]  # node 0 has 3,000 in-edges
    g = Graph.from_edge_index(edge_index, n)
    int32 = mode == "sum"
    full = _graph_tensors(g, n, on_cuda=True, int32=int32)
    csr_only = _csr_tensors(g, n, on_cuda=True, int32=int32)
    assert len(full) == len(csr_only) == 12
    for i in range(6):  # the forward's CSR inputs are the same objects on both routes
        assert csr_only[i] is full[i] or (i == 3 and csr_only[i] is None)
    assert all(t is None for t in csr_only[6:])
    for index32, hub_rows, plan, ptr in (
        (full[2], full[4], full[5], g.rowptr),
        (full[8], full[10], full[11], full[6]),
    ):
        if int32:
            assert index32 is not None and index32.dtype == torch.int32
            assert plan is not None and num_segments(plan, n) >= n
            assert hub_rows.numel() == 0
        else:
            assert index32 is None and plan is None
            assert torch.equal(hub_rows, (ptr.diff() > _C.HUB_DEGREE).nonzero().view(-1))
    if not int32:
        assert full[4].tolist() == [0]  # the CSR's hub; the transpose has none
