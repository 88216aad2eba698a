"""The CPU sum kernel's shapes (issue 19): accumulator sets that take a row's edges in turn (rows
shorter than, equal to and longer than their count), every feature width of one pass with its
overlapping last vector, col_scale folded into x or applied per edge, and the int32 index copy
it reads in place of col."""

from __future__ import annotations

import pytest
import torch
from ref_aggregate import aggregate_ref

from galfast import Graph
from galfast._native import _C
from galfast.ops import aggregate, block_aggregate, sample_neighbors
from galfast.ops.aggregate import int32_index, launch_aggregate

_SUM = int(_C.AggMode.SUM)


# On this many nodes _degrees_graph has over 32 edges per source, so the CPU sum folds col_scale
# into a pre-scaled copy of x (fold_pays in csrc/aggregate/aggregate.h); on 1,000 it does not.
FOLDED = 64


def _degrees_graph(num_nodes: int) -> Graph:
    """Row d has in-degree d for d = 0..17 (below, at and above every accumulator-set count,
    with every remainder); row 18 draws 300 sources (duplicates merge: a hub of about 260 edges
    on 1,000 nodes); nodes 19.. are sources only, except on FOLDED nodes, where every node from
    19 on takes an edge from every node (50 edges per source: col_scale folded into x)."""
    gen = torch.Generator().manual_seed(0)
    dst = torch.tensor([d for d in range(18) for _ in range(d)] + [18] * 300)
    src = torch.randint(0, num_nodes, (len(dst),), generator=gen)
    if num_nodes == FOLDED:
        dense = torch.arange(19, num_nodes)
        src = torch.cat([src, torch.arange(num_nodes).repeat(len(dense))])
        dst = torch.cat([dst, dense.repeat_interleave(num_nodes)])
    return Graph.from_edge_index(torch.stack([src, dst]), num_nodes)


def _ref(g: Graph, x, weight, reduce, norm):
    return aggregate_ref(g.num_nodes, g.col, g.row, x, weight, reduce, norm)


WIDTHS = list(range(1, 41)) + [47, 63, 64, 65, 72, 100, 129]


@pytest.mark.usefixtures("aggregate_simd")
@pytest.mark.parametrize("f", WIDTHS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("num_nodes", [FOLDED, 1000])
def test_every_width_and_degree_matches_the_reference(f, dtype, num_nodes):
    g = _degrees_graph(num_nodes)
    gen = torch.Generator().manual_seed(f)
    x = torch.randn(num_nodes, f, generator=gen, dtype=dtype, requires_grad=True)
    w = torch.rand(g.num_edges, generator=gen, dtype=dtype) + 0.5
    grad = torch.randn(num_nodes, f, generator=gen, dtype=dtype)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {}
    for reduce, norm, weight in [("sum", "gcn", None), ("mean", None, None), ("sum", None, w)]:
        out = aggregate(g, x, weight, reduce=reduce, norm=norm)
        want = _ref(g, x, weight, reduce, norm)
        torch.testing.assert_close(out, want, **tol)
        (got_grad,) = torch.autograd.grad(out, x, grad)
        (want_grad,) = torch.autograd.grad(want, x, grad)
        torch.testing.assert_close(got_grad, want_grad, **tol)


@pytest.mark.usefixtures("aggregate_simd")
@pytest.mark.parametrize("f", [1, 3, 4, 7, 8, 20, 33, 64, 65])
@pytest.mark.parametrize("num_nodes", [FOLDED, 1000])
@pytest.mark.parametrize("weighted", [False, True])
def test_int32_and_int64_indices_give_bitwise_the_same_sums(f, num_nodes, weighted):
    # The AVX2 build specialises the int32 index; the int64 one runs the generic variant,
    # whose factor of 1 must round like a plain add.
    g = _degrees_graph(num_nodes)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(num_nodes, f, generator=gen)
    w = torch.rand(g.num_edges, generator=gen) if weighted else None
    scale = g.degree_scale("gcn", torch.float32)
    empty = g.rowptr.new_empty(0)
    outs = [
        launch_aggregate(g.rowptr, g.col, col32, None, w, scale, scale, empty, None, x, None, _SUM)[
            0
        ]
        for col32 in (None, g.col.int())
    ]
    assert torch.equal(outs[0], outs[1])
    torch.testing.assert_close(outs[0], _ref(g, x, w, "sum", "gcn"), rtol=1e-5, atol=1e-5)


def test_the_int32_copies_are_cached_per_graph_and_only_for_the_cpu_sum():
    g = _degrees_graph(30)
    x = torch.randn(30, 5, requires_grad=True)
    aggregate(g, x, reduce="max").sum().backward()
    assert not any(isinstance(k, tuple) and k[0] == "int32" for k in g._cache)
    with torch.no_grad():
        aggregate(g, x)
    assert set(k for k in g._cache if isinstance(k, tuple) and k[0] == "int32") == {
        ("int32", "col")
    }
    aggregate(g, x, norm="gcn").sum().backward()
    col32, row32 = g._cache[("int32", "col")][0], g._cache[("int32", "csc_row")][0]
    assert col32.dtype == row32.dtype == torch.int32
    assert torch.equal(col32.long(), g.col) and torch.equal(row32.long(), g.csc.row)
    aggregate(g, x)
    assert g._cache[("int32", "col")][0] is col32  # made once


class _Structure:
    def __init__(self):
        self._cache = {}

    def cached(self, key, build):
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]


@pytest.mark.parametrize(
    "values, fits", [([0, 5, 2**31 - 1], True), ([0, 2**31], False), ([-1, 3], False), ([], True)]
)
def test_an_index_outside_int32_gets_no_copy(values, fits):
    index = torch.tensor(values, dtype=torch.long)
    copy = int32_index(_Structure(), "col", index)
    assert (copy is not None) == fits
    if fits:
        assert copy.dtype == torch.int32 and torch.equal(copy.long(), index)


@pytest.mark.parametrize("bound, fits", [(4, True), (2**31, True), (2**31 + 1, False)])
def test_a_bound_decides_without_reading_the_values(bound, fits):
    # The GPU's rule (reading values would synchronise): the structure's bound decides. The
    # -1 would fail the value check, so a copy shows the values were not read.
    copy = int32_index(_Structure(), "col", torch.tensor([-1, 3]), bound)
    assert (copy is not None) == fits


def test_blocks_use_their_own_int32_copies():
    g = Graph.from_edge_index(torch.randint(0, 60, (2, 500), generator=torch.Generator()), 60)
    x = torch.randn(60, 9, dtype=torch.float64)
    blocks = sample_neighbors(g, torch.arange(10), [5, 5], seed=0)
    block = blocks[-1]
    h = x[block.src_nodes].requires_grad_()
    out = block_aggregate(block, h, reduce="mean")
    assert torch.equal(block.cached(("int32", "col"), None).long(), block.col)
    torch.testing.assert_close(
        out, aggregate_ref(block.num_dst, block.col, block.row, h, None, "mean")
    )
    assert torch.autograd.gradcheck(lambda h: block_aggregate(block, h, reduce="sum"), (h,))


def test_a_first_call_under_torch_compile_makes_no_int32_copy():
    # The copy's range check reads values on the host, which a fullgraph trace cannot do: the
    # traced call reads the int64 indices.
    g = _degrees_graph(30)
    x = torch.randn(30, 6, dtype=torch.float64, requires_grad=True)
    compiled = torch.compile(
        lambda x: aggregate(g, x, norm="gcn").relu().sum(), fullgraph=True, backend="aot_eager"
    )
    value = compiled(x)
    (grad,) = torch.autograd.grad(value, x)
    x_ref = x.detach().requires_grad_()
    want = _ref(g, x_ref, None, "sum", "gcn").relu().sum()
    torch.testing.assert_close(value, want)
    torch.testing.assert_close(grad, torch.autograd.grad(want, x_ref)[0])
    assert ("int32", "col") not in g._cache


@pytest.mark.parametrize("weighted", [False, True])
def test_the_padded_copy_of_x_gives_bitwise_the_unpadded_sums(weighted):
    # With col_scale folded (FOLDED nodes), the AVX2 build's float sum
    # reads x from a copy whose rows are padded to whole vectors when F is no multiple of 8 and
    # at most 64 (F = 20 reads 3 aligned vectors instead of 2 and an overlapping one); the
    # int64 index runs the generic variant on an unpadded copy. Each feature is the same sum,
    # so the two agree bit for bit, on one thread and on two.
    g = _degrees_graph(FOLDED)
    gen = torch.Generator().manual_seed(2)
    scale = g.degree_scale("gcn", torch.float32)
    empty = g.rowptr.new_empty(0)
    threads = torch.get_num_threads()
    try:
        for f in [f for f in range(9, 72) if f % 8 != 0]:
            x = torch.randn(FOLDED, f, generator=gen)
            w = torch.rand(g.num_edges, generator=gen) if weighted else None
            outs = []
            for num_threads, col32 in [(1, None), (1, g.col.int()), (2, g.col.int())]:
                torch.set_num_threads(num_threads)
                outs.append(
                    launch_aggregate(
                        g.rowptr, g.col, col32, None, w, scale, scale, empty, None, x, None, _SUM
                    )[0]
                )
            assert torch.equal(outs[0], outs[1]) and torch.equal(outs[1], outs[2]), f
            want = _ref(g, x, w, "sum", "gcn")
            torch.testing.assert_close(outs[1], want, rtol=1e-5, atol=1e-5)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.usefixtures("aggregate_simd")
@pytest.mark.parametrize("f", [16, 20, 64])
@pytest.mark.parametrize("per_source,folded", [(32, True), (31, False)])
def test_col_scale_is_folded_into_x_from_32_edges_per_source(f, per_source, folded):
    # Folded, each edge adds a row of the pre-scaled copy of x: bitwise the sum run on x * scale
    # without a column scale. Applied per edge instead, the scale enters through a fused
    # multiply-add, which rounds once where the copy rounds twice, so some sums differ in their
    # last bits.
    n = 64
    src = torch.arange(n).repeat_interleave(per_source)
    dst = (src + torch.arange(per_source).repeat(n)) % n  # per_source distinct edges a source
    g = Graph.from_edge_index(torch.stack([src, dst]), n)
    assert g.num_edges == n * per_source
    x = torch.randn(n, f, generator=torch.Generator().manual_seed(f))
    scale = g.degree_scale("gcn", torch.float32)
    col32, empty = int32_index(g, "col", g.col), g.rowptr.new_empty(0)

    def run(x, col_scale):
        return launch_aggregate(
            g.rowptr, g.col, col32, None, None, scale, col_scale, empty, None, x, None, _SUM
        )[0]

    same = torch.equal(run(x, scale), run(x * scale[:, None], None))
    assert same == folded
