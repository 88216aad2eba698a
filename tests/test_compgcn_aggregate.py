import pytest
import torch
from graphs import awkward_graphs, random_edges
from ref_compgcn import ccorr_ref, compgcn_aggregate_ref

from galfast import Graph
from galfast._native import _C
from galfast.ops import compgcn_aggregate
from galfast.ops.compgcn_aggregate import (
    REL_CHUNK,
    launch_compgcn_aggregate,
    launch_compgcn_rel_grad,
    relation_order,
)

COMPOSITIONS = ["sub", "mult", "corr"]
DTYPES = [torch.float32, torch.float64]


def typed_graph(edge_index, edge_type, num_nodes):
    """A Graph keeping parallel edges (unlike from_edge_index, which merges equal triples)."""
    src, dst = edge_index
    order = torch.argsort(dst * max(num_nodes, 1) + src, stable=True)
    rowptr = torch.zeros(num_nodes + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(torch.bincount(dst, minlength=num_nodes), 0)
    return Graph(rowptr, src[order], num_nodes, edge_type=edge_type[order])


def _ref_for(g, x, rel, composition, weight=None, norm=None):
    return compgcn_aggregate_ref(
        g.num_nodes, g.col, g.row, g.edge_type, x, rel, composition, weight, norm
    )


def _tol(dtype):
    return {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {}


def _awkward(name, num_rels=6, seed=0):
    edge_index, n = awkward_graphs()[name]
    gen = torch.Generator().manual_seed(seed)
    types = torch.randint(0, num_rels - 1, (edge_index.size(1),), generator=gen)  # last unused
    return typed_graph(edge_index, types, n)


@pytest.mark.parametrize("name", list(awkward_graphs()))
@pytest.mark.parametrize("composition", COMPOSITIONS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm", [None, "gcn"])
def test_matches_reference_on_awkward_graphs(name, composition, dtype, norm):
    g = _awkward(name)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(g.num_nodes, 10, generator=gen, dtype=dtype, requires_grad=True)
    rel = torch.randn(6, 10, generator=gen, dtype=dtype, requires_grad=True)
    weight = torch.rand(g.num_edges, generator=gen, dtype=dtype) + 0.5
    out = compgcn_aggregate(g, x, rel, weight, composition=composition, norm=norm)
    expected = _ref_for(g, x, rel, composition, weight, norm)
    torch.testing.assert_close(out, expected, **_tol(dtype))
    grad = torch.randn(out.shape, generator=gen, dtype=dtype)
    got = torch.autograd.grad(out, (x, rel), grad)
    want = torch.autograd.grad(expected, (x, rel), grad)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, **_tol(dtype))
    assert torch.equal(got[1][5], torch.zeros(10, dtype=dtype))  # relation 5 is never used


def test_parallel_edges_and_self_loops_count_separately():
    # The same triple twice, and a self loop: each edge is one message.
    edge_index = torch.tensor([[0, 0, 1], [1, 1, 1]])
    g = typed_graph(edge_index, torch.tensor([0, 0, 1]), 2)
    x, rel = torch.tensor([[1.0], [2.0]]), torch.tensor([[0.5], [1.0]])
    out = compgcn_aggregate(g, x, rel, composition="sub")
    assert out.view(-1).tolist() == [0.0, 2 * 0.5 + 1.0]


@pytest.mark.parametrize("composition", COMPOSITIONS)
@pytest.mark.parametrize("f", [1, 2, 3, 7, 8, 31, 64, 65, 100, 200])
def test_every_feature_width_matches_reference(composition, f):
    # CPU register tiles of 64/32 floats, a 4-28 tail and a 1-3 remainder; corr runs on
    # f // 2 + 1 (re, im) pairs, odd f included.
    n = 40
    gen = torch.Generator().manual_seed(f)
    g = typed_graph(random_edges(n, 300, seed=f), torch.randint(0, 4, (300,), generator=gen), n)
    x = torch.randn(n, f, generator=gen)
    rel = torch.randn(4, f, generator=gen)
    torch.testing.assert_close(
        compgcn_aggregate(g, x, rel, composition=composition, norm="gcn"),
        _ref_for(g, x, rel, composition, norm="gcn"),
        rtol=1e-4,
        atol=1e-4,
    )


def test_spectral_correlation_equals_the_definition():
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(5, 9, generator=gen), torch.randn(5, 9, generator=gen)
    k = 3
    direct = torch.stack([(a[i] * b[i].roll(-k)).sum() for i in range(5)])
    torch.testing.assert_close(ccorr_ref(a, b)[:, k], direct)
    spectral = torch.fft.irfft(torch.fft.rfft(a).conj() * torch.fft.rfft(b), n=9)
    torch.testing.assert_close(ccorr_ref(a, b), spectral, rtol=1e-5, atol=1e-5)


def _gradcheck_graph():
    hub = torch.stack([torch.arange(1, 40), torch.zeros(39, dtype=torch.long)])
    extra = torch.tensor([[0, 3, 3, 5, 5, 7], [4, 3, 6, 6, 6, 8]])  # self loop, duplicates
    edge_index = torch.cat([hub, extra], 1)
    types = torch.arange(edge_index.size(1)) % 4  # relation 4 unused
    return typed_graph(edge_index, types, 42)  # nodes 40, 41 isolated


@pytest.mark.parametrize("composition", COMPOSITIONS)
@pytest.mark.parametrize("norm", [None, "gcn"])
def test_gradcheck_x_and_rel(composition, norm):
    g = _gradcheck_graph()
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(g.num_nodes, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    rel = torch.randn(5, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.rand(g.num_edges, generator=gen, dtype=torch.float64) + 0.5
    assert torch.autograd.gradcheck(
        lambda x, rel: compgcn_aggregate(g, x, rel, w, composition=composition, norm=norm),
        (x, rel),
    )


def test_relation_order_chunks_each_relation():
    types = torch.tensor([2] * (2 * REL_CHUNK + 5) + [0] * 3)
    g = typed_graph(torch.zeros(2, types.numel(), dtype=torch.long), types, 1)
    order = relation_order(g, 4)
    assert order.rel_chunkptr.tolist() == [0, 1, 1, 4, 4]  # relations 1 and 3 have no chunk
    assert order.chunkptr.tolist() == [0, 3, 3 + REL_CHUNK, 3 + 2 * REL_CHUNK, types.numel()]
    assert torch.equal(g.edge_type[order.edge], g.edge_type.sort(stable=True).values)
    assert torch.equal(order.row, g.row[order.edge]) and torch.equal(order.col, g.col[order.edge])


@pytest.mark.parametrize("composition", COMPOSITIONS)
def test_results_are_bitwise_stable_across_runs_and_threads(composition):
    # One relation far above the chunk size (several chunks), a hub node, many relations.
    n, e = 2000, 30000
    gen = torch.Generator().manual_seed(7)
    edge_index = torch.cat([random_edges(n, e, seed=5), awkward_graphs()["hub"][0][:, :1999]], 1)
    types = torch.randint(0, 50, (edge_index.size(1),), generator=gen)
    types[: 3 * REL_CHUNK] = 3
    g = typed_graph(edge_index, types, n)
    x = torch.randn(n, 40, generator=gen, requires_grad=True)
    rel = torch.randn(50, 40, generator=gen, requires_grad=True)
    before = torch.get_num_threads()
    results = []
    try:
        for threads in (1, 2, 3, 1):
            torch.set_num_threads(threads)
            out = compgcn_aggregate(g, x, rel, composition=composition, norm="gcn")
            gx, grel = torch.autograd.grad(out, (x, rel), torch.ones_like(out))
            results.append((out, gx, grel))
    finally:
        torch.set_num_threads(before)
    for tensors in results[1:]:
        for got, want in zip(tensors, results[0]):
            assert torch.equal(got, want)


@pytest.mark.parametrize("composition", COMPOSITIONS)
def test_torch_compile_matches_eager(composition):
    n = 30
    g = typed_graph(random_edges(n, 150, seed=2), torch.arange(150) % 3, n)
    x = torch.randn(n, 8, requires_grad=True)
    rel = torch.randn(3, 8, requires_grad=True)

    def f(x, rel):
        return compgcn_aggregate(g, x, rel, composition=composition, norm="gcn").tanh().sum()

    assert "Eager" in type(compgcn_aggregate(g, x, rel).grad_fn).__name__
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    eager_val, eager_grads = f(x, rel), torch.autograd.grad(f(x, rel), (x, rel))
    comp_val = compiled(x, rel)
    comp_grads = torch.autograd.grad(comp_val, (x, rel))
    torch.testing.assert_close(comp_val, eager_val)
    for got, want in zip(comp_grads, eager_grads):
        torch.testing.assert_close(got, want)


def test_opcheck():
    n = 12
    g = typed_graph(random_edges(n, 40, seed=4), torch.arange(40) % 3, n)
    x = torch.randn(n, 6, dtype=torch.float64, requires_grad=True)
    rel = torch.randn(3, 6, dtype=torch.float64, requires_grad=True)
    w = torch.rand(g.num_edges, dtype=torch.float64)
    order, csc = relation_order(g, 3), g.csc
    graph_args = (g.rowptr, g.col, g.edge_type, csc.colptr, csc.row, g.edge_type[csc.edge_id])
    order_args = (order.chunkptr, order.rel_chunkptr, order.row, order.col)
    weights = (w, w[csc.edge_id], w[order.edge])
    for op in (_C.Composition.SUB, _C.Composition.MULT, _C.Composition.CORR):
        args = (*graph_args, *order_args, x, rel, *weights, None, None, int(op))
        torch.library.opcheck(torch.ops.galfast.compgcn_aggregate.default, args)
    grad = torch.randn(n, 6, dtype=torch.float64)
    mult = int(_C.Composition.MULT)
    rel_args = (*order_args, weights[2], None, None, grad, x.detach(), rel.detach(), mult)
    torch.library.opcheck(torch.ops.galfast.compgcn_rel_grad.default, rel_args)


def _small():
    g = typed_graph(torch.tensor([[0, 1], [1, 2]]), torch.tensor([0, 1]), 3)
    return g, torch.ones(3, 4), torch.ones(2, 4)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda g, x, r: (Graph.from_edge_index(torch.tensor([[0], [1]]), 3), x, r), "edge_type"),
        (lambda g, x, r: (g, torch.ones(4, 4), r), "rows but the graph has 3"),
        (lambda g, x, r: (g, torch.ones(3), r), "shape"),
        (lambda g, x, r: (g, x, torch.ones(2, 5)), r"rel must have shape \[num_relations, 4\]"),
        (lambda g, x, r: (g, x, torch.ones(1, 4)), "relation 1 but rel has 1 rows"),
        (lambda g, x, r: (g, x, r.double()), "rel has dtype"),
        (lambda g, x, r: (g, x.long(), r.long()), "int64"),
        (lambda g, x, r: ("graph", x, r), "galfast.Graph"),
        (lambda g, x, r: (g, [[1.0]], r), "torch.Tensor"),
    ],
)
def test_bad_inputs(change, message):
    g, x, rel = change(*_small())
    with pytest.raises(ValueError, match=message):
        compgcn_aggregate(g, x, rel)


def test_bad_options():
    g, x, rel = _small()
    with pytest.raises(ValueError, match="composition"):
        compgcn_aggregate(g, x, rel, composition="add")
    with pytest.raises(ValueError, match="norm"):
        compgcn_aggregate(g, x, rel, norm="mean")
    with pytest.raises(ValueError, match=r"shape \[2\]"):
        compgcn_aggregate(g, x, rel, torch.ones(3))
    with pytest.raises(ValueError, match="detach"):
        compgcn_aggregate(g, x, rel, torch.ones(2, requires_grad=True))
    with pytest.raises(ValueError, match="NaN"):
        compgcn_aggregate(g, x, rel, torch.tensor([1.0, float("nan")]))


def test_kernels_refuse_out_of_range_indices():
    # Indices that bypass the Graph's checks (edits through .data) reach the kernels, which
    # raise instead of reading out of bounds.
    g, x, rel = _small()
    bad_type = torch.tensor([0, 7])
    with pytest.raises(ValueError, match="edge_type"):
        launch_compgcn_aggregate(
            g.rowptr, g.col, bad_type, None, None, None, x, rel, int(_C.Composition.MULT)
        )
    bad_col = torch.tensor([0, 9])
    with pytest.raises(ValueError, match="col"):
        launch_compgcn_aggregate(
            g.rowptr, bad_col, g.edge_type, None, None, None, x, rel, int(_C.Composition.SUB)
        )
    order = relation_order(g, 2)
    with pytest.raises(ValueError, match="row"):
        launch_compgcn_rel_grad(
            order.chunkptr,
            order.rel_chunkptr,
            torch.tensor([0, 5]),
            order.col,
            None,
            None,
            None,
            x,
            x,
            rel,
            int(_C.Composition.MULT),
        )


@pytest.mark.cuda
@pytest.mark.parametrize("name", list(awkward_graphs()))
@pytest.mark.parametrize("composition", COMPOSITIONS)
@pytest.mark.parametrize("f", [6, 200])
def test_cuda_matches_cpu_forward_and_backward(name, composition, f):
    g = _awkward(name)
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(g.num_nodes, f, generator=gen, dtype=torch.float64)
    rel = torch.randn(6, f, generator=gen, dtype=torch.float64)
    weight = torch.rand(g.num_edges, generator=gen, dtype=torch.float64) + 0.5
    results = []
    for device in ("cpu", "cuda"):
        # Copies: on the CPU, .to(device) would return x itself and make it a leaf for both.
        xd, reld = (t.to(device, copy=True).requires_grad_() for t in (x, rel))
        out = compgcn_aggregate(
            g.to(device), xd, reld, weight.to(device), composition=composition, norm="gcn"
        )
        (out * out.detach().cos()).sum().backward()
        results.append([out, xd.grad, reld.grad])
    for on_cpu, on_gpu in zip(*results):
        torch.testing.assert_close(on_gpu.cpu(), on_cpu)


@pytest.mark.cuda
@pytest.mark.parametrize("composition", ["sub", "mult"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cuda_low_precision_matches_reference(composition, dtype):
    g = _awkward("hub").to("cuda")
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(g.num_nodes, 40, generator=gen).cuda()
    rel = torch.randn(6, 40, generator=gen).cuda()
    out = compgcn_aggregate(g, x.to(dtype), rel.to(dtype), composition=composition, norm="gcn")
    # Tolerance of the dtype itself: rounding the inputs to it moves the result about this much.
    exact = _ref_for(g, x.double(), rel.double(), composition, norm="gcn")
    rounded = _ref_for(g, x.to(dtype).double(), rel.to(dtype).double(), composition, norm="gcn")
    tolerance = 4 * (rounded - exact).abs().max().item() + 1e-2
    torch.testing.assert_close(out.double(), rounded, atol=tolerance, rtol=0)


@pytest.mark.cuda
@pytest.mark.parametrize("composition", COMPOSITIONS)
def test_cuda_gradcheck_and_determinism(composition):
    g = _gradcheck_graph().to("cuda")
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(g.num_nodes, 6, generator=gen, dtype=torch.float64).cuda().requires_grad_()
    rel = torch.randn(5, 6, generator=gen, dtype=torch.float64).cuda().requires_grad_()

    def f(x, rel):
        return compgcn_aggregate(g, x, rel, composition=composition, norm="gcn")

    assert torch.autograd.gradcheck(f, (x, rel))
    first = torch.autograd.grad(f(x, rel).sum(), (x, rel))
    second = torch.autograd.grad(f(x, rel).sum(), (x, rel))
    for a, b in zip(first, second):
        assert torch.equal(a, b)
