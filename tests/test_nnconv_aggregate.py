import importlib

import pytest
import torch
from graphs import awkward_graphs, random_edges
from molecule_graphs import molecule_batch
from ref_nnconv import nnconv_aggregate_ref

from galfast import Graph
from galfast.nn._graph_input import csr_from_coo
from galfast.ops import nnconv_aggregate

# The module (galfast.ops.nnconv_aggregate the attribute is the function).
nnconv_module = importlib.import_module("galfast.ops.nnconv_aggregate")


def _case(edge_index, n, f_in, hidden, f_out, seed, dtype=torch.float64):
    """The Graph (parallel edges kept), the CSR order, and random x, h (input order), W, b."""
    graph, order = csr_from_coo(edge_index[1], edge_index[0], n)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, f_in, generator=gen, dtype=dtype, requires_grad=True)
    h = torch.randn(edge_index.size(1), hidden, generator=gen, dtype=dtype, requires_grad=True)
    w = torch.randn(f_in * f_out, hidden, generator=gen, dtype=dtype, requires_grad=True)
    b = torch.randn(f_in * f_out, generator=gen, dtype=dtype, requires_grad=True)
    return graph, order, x, h, w, b


def _graphs():
    cases = dict(awkward_graphs())
    cases["bonds"] = molecule_batch(6, seed=1)[:2]
    cases["complete"] = molecule_batch(4, seed=2, complete=True)[:2]
    return cases


@pytest.mark.parametrize("name", list(_graphs()))
@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("with_bias", [True, False])
def test_matches_reference_values_and_gradients(name, reduce, with_bias):
    edge_index, n = _graphs()[name]
    graph, order, x, h, w, b = _case(edge_index, n, 5, 6, 3, seed=0)
    b = b if with_bias else None
    out = nnconv_aggregate(graph, x, h[order], w, b, reduce=reduce)
    expected = nnconv_aggregate_ref(n, edge_index[0], edge_index[1], x, h, w, b, reduce)
    torch.testing.assert_close(out, expected)
    inputs = [x, h, w] + ([b] if with_bias else [])
    grad = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(1))
    got = torch.autograd.grad(out, inputs, grad, allow_unused=True)
    want = torch.autograd.grad(expected, inputs, grad, allow_unused=True)
    for g_got, g_want in zip(got, want):
        torch.testing.assert_close(g_got, torch.zeros_like(g_got) if g_want is None else g_want)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_float32_matches_float64_reference(reduce):
    edge_index, n = random_edges(60, 400, seed=4), 60
    graph, order, x, h, w, b = _case(edge_index, n, 16, 24, 8, seed=3, dtype=torch.float32)
    out = nnconv_aggregate(graph, x, h[order], w, b, reduce=reduce)
    expected = nnconv_aggregate_ref(
        n, edge_index[0], edge_index[1], x.double(), h.double(), w.double(), b.double(), reduce
    )
    torch.testing.assert_close(out.double(), expected, rtol=1e-4, atol=1e-4)


def test_small_blocks_give_the_same_result(monkeypatch):
    """The GPU's path (rows in blocks bounded by _BLOCK_BYTES, run here on the CPU) gives the
    values and gradients of the CPU's one-region kernels for any block size (blocks of one row
    up to all rows at once)."""
    edge_index, n, _, _ = molecule_batch(8, seed=5)
    graph, order, x, h, w, b = _case(edge_index, n, 4, 5, 3, seed=6)
    out = nnconv_aggregate(graph, x, h[order], w, b, reduce="mean")
    results = [(out, *torch.autograd.grad(out.square().sum(), [x, h, w, b]))]
    monkeypatch.setattr(nnconv_module, "_use_fused", lambda x: False)
    for block in (1, 4 * 5 * 8 * 3, 2**30):
        monkeypatch.setattr(nnconv_module, "_BLOCK_BYTES", block)
        out = nnconv_aggregate(graph, x, h[order], w, b, reduce="mean")
        results.append((out, *torch.autograd.grad(out.square().sum(), [x, h, w, b])))
    for other in results[1:]:
        for a, c in zip(results[0], other):
            torch.testing.assert_close(a, c)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_gradcheck(reduce):
    hub = torch.stack([torch.arange(1, 12), torch.zeros(11, dtype=torch.long)])
    extra = torch.tensor([[0, 3, 3, 5, 5, 7], [4, 3, 6, 6, 6, 8]])  # self loop, duplicates
    edge_index = torch.cat([hub, extra], 1)
    graph, order, x, h, w, b = _case(edge_index, 14, 3, 4, 2, seed=7)  # 12, 13 isolated
    h_csr = h[order].detach().requires_grad_()
    assert torch.autograd.gradcheck(
        lambda x, h, w, b: nnconv_aggregate(graph, x, h, w, b, reduce=reduce), (x, h_csr, w, b)
    )


def test_deterministic_across_thread_counts():
    edge_index, n, _, _ = molecule_batch(20, seed=8, complete=True)
    graph, order, x, h, w, b = _case(edge_index, n, 8, 16, 8, seed=9, dtype=torch.float32)
    runs = []
    threads = torch.get_num_threads()
    try:
        for t in (1, 2, 3):
            torch.set_num_threads(t)
            out = nnconv_aggregate(graph, x, h[order], w, b)
            runs.append((out, *torch.autograd.grad(out.sum(), [x, h, w, b])))
    finally:
        torch.set_num_threads(threads)
    for other in runs[1:]:
        for a, c in zip(runs[0], other):
            assert torch.equal(a, c)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_many_tiles_and_odd_sizes_match_reference(reduce):
    """Sizes that leave remainders everywhere in the CPU kernels: hidden units not a multiple
    of the register tile, features and outputs not a multiple of the vector width, rows spread
    over several tiles per chunk and several weight-pass tiles, S rows wider than one GEMM depth
    block."""
    edge_index, n = random_edges(1200, 4800, seed=12), 1200
    graph, order, x, h, w, b = _case(edge_index, n, 33, 66, 19, seed=13)
    out = nnconv_aggregate(graph, x, h[order], w, b, reduce=reduce)
    expected = nnconv_aggregate_ref(n, edge_index[0], edge_index[1], x, h, w, b, reduce)
    torch.testing.assert_close(out, expected)
    grad = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(2))
    got = torch.autograd.grad(out, [x, h, w, b], grad)
    want = torch.autograd.grad(expected, [x, h, w, b], grad)
    for g_got, g_want in zip(got, want):
        torch.testing.assert_close(g_got, g_want)


def test_cpu_pass_is_one_native_call(monkeypatch):
    """On the CPU the forward is one kernel call (one parallel region) and the backward two
    (the fused backward, then grad_x over the CSC), however many rows: a call per block of rows
    meant a barrier each, which made two threads slower than one on a loaded machine."""
    edge_index, n, _, _ = molecule_batch(40, seed=14, complete=True)
    graph, order, x, h, w, b = _case(edge_index, n, 8, 16, 8, seed=15, dtype=torch.float32)
    monkeypatch.setattr(nnconv_module, "_BLOCK_BYTES", 8 * 16 * 4)  # one row per block
    calls = []
    launch = nnconv_module.run_kernel

    def counting(kernel, params, device):
        calls.append(kernel)
        launch(kernel, params, device)

    monkeypatch.setattr(nnconv_module, "run_kernel", counting)
    out = nnconv_aggregate(graph, x, h[order], w, b)
    assert calls == ["nnconv_fused_forward"]
    torch.autograd.grad(out.sum(), [x, h, w, b])
    assert calls == ["nnconv_fused_forward", "nnconv_fused_backward", "nnconv_grad_x"]


def test_opcheck():
    edge_index, n, _, _ = molecule_batch(3, seed=10)
    graph, order, x, h, w, b = _case(edge_index, n, 3, 4, 2, seed=11)
    csc = graph.csc
    args = (graph.rowptr, graph.col, csc.colptr, csc.edge_id, x, h[order].detach(), w, b, None)
    torch.library.opcheck(nnconv_module._nnconv_op, args)


def _valid():
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), 2)
    return g, torch.randn(2, 3), torch.randn(2, 4), torch.randn(6, 4), torch.randn(6)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a: {**a, "graph": "no"}, "galfast.Graph"),
        (lambda a: {**a, "x": a["x"][:, :0]}, "at least one feature"),
        (lambda a: {**a, "x": a["x"][:1]}, "rows but the graph"),
        (lambda a: {**a, "edge_hidden": a["edge_hidden"][:1]}, "one row per edge"),
        (lambda a: {**a, "edge_hidden": a["edge_hidden"].double()}, "dtype"),
        (lambda a: {**a, "weight": a["weight"][:5]}, "in_features \\* out_features"),
        (lambda a: {**a, "weight": a["weight"][:, :3]}, "in_features \\* out_features"),
        (lambda a: {**a, "bias": a["bias"][:2]}, "bias must have shape"),
        (lambda a: {**a, "reduce": "max"}, "reduce must be one of"),
    ],
)
def test_bad_inputs_raise_clear_errors(change, message):
    g, x, h, w, b = _valid()
    args = change({"graph": g, "x": x, "edge_hidden": h, "weight": w, "bias": b, "reduce": "sum"})
    reduce = args.pop("reduce")
    with pytest.raises(ValueError, match=message):
        nnconv_aggregate(*args.values(), reduce=reduce)


def test_kernel_refuses_an_index_edited_behind_the_graphs_back():
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), 2)
    _ = g.csc
    g.col.data[0] = 7  # bypasses the version counter
    with pytest.raises(ValueError, match="col\\[0\\] = 7 lies outside"):
        nnconv_aggregate(g, torch.randn(2, 3), torch.randn(2, 4), torch.randn(6, 4))
