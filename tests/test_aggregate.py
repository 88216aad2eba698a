import pytest
import torch
from graphs import awkward_graphs, random_edges
from hypothesis import given, settings
from hypothesis import strategies as st
from ref_aggregate import aggregate_ref

from galfast import Graph
from galfast._native import _C
from galfast.ops import aggregate
from galfast.ops.aggregate import launch_aggregate

REDUCES = ["sum", "mean", "max"]
NORMS = [None, "gcn"]


def _ref_for(g: Graph, x, weight, reduce, norm):
    return aggregate_ref(g.num_nodes, g.col, g.row, x, weight, reduce, norm)


@pytest.mark.usefixtures("aggregate_simd")
@pytest.mark.parametrize("name", list(awkward_graphs()))
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_reference_on_awkward_graphs(name, reduce, norm, weighted):
    edge_index, n = awkward_graphs()[name]
    gen = torch.Generator().manual_seed(0)
    weight = torch.rand(edge_index.size(1), generator=gen, dtype=torch.float64) + 0.5
    g = Graph.from_edge_index(edge_index, n, weight if weighted else None)
    x = torch.randn(n, 7, generator=gen, dtype=torch.float64, requires_grad=True)
    out = aggregate(g, x, reduce=reduce, norm=norm)
    expected = _ref_for(g, x, g.edge_weight, reduce, norm)
    torch.testing.assert_close(out, expected)
    grad = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    (got,) = torch.autograd.grad(out, x, grad)
    (want,) = torch.autograd.grad(expected, x, grad)
    torch.testing.assert_close(got, want)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 25),
    e=st.integers(0, 120),
    f=st.integers(1, 9),
    seed=st.integers(0, 2**16),
    reduce=st.sampled_from(REDUCES),
    norm=st.sampled_from(NORMS),
    weighted=st.booleans(),
    dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_matches_reference_on_random_graphs(n, e, f, seed, reduce, norm, weighted, dtype):
    edge_index = random_edges(n, e, seed)
    gen = torch.Generator().manual_seed(seed)
    weight = torch.rand(edge_index.size(1), generator=gen, dtype=dtype) if weighted else None
    g = Graph.from_edge_index(edge_index, n, weight)
    x = torch.randn(n, f, generator=gen, dtype=dtype)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {}
    torch.testing.assert_close(
        aggregate(g, x, reduce=reduce, norm=norm),
        _ref_for(g, x, g.edge_weight, reduce, norm),
        **tol,
    )


def _gradcheck_graph():
    hub = torch.stack([torch.arange(1, 40), torch.zeros(39, dtype=torch.long)])
    extra = torch.tensor([[0, 3, 3, 5, 5, 7], [4, 3, 6, 6, 6, 8]])  # self loop, duplicate
    return Graph.from_edge_index(torch.cat([hub, extra], 1), 42)  # nodes 40, 41 isolated


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("norm", NORMS)
def test_gradcheck_x_and_edge_weight(reduce, norm):
    g = _gradcheck_graph()
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(g.num_nodes, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    w = (torch.rand(g.num_edges, generator=gen, dtype=torch.float64) + 0.5).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda x, w: aggregate(g, x, w, reduce=reduce, norm=norm), (x, w)
    )


def test_max_gradient_goes_to_the_first_maximum():
    g = Graph.from_edge_index(torch.tensor([[0, 1, 2], [3, 3, 3]]), 4)
    x = torch.tensor([[1.0], [5.0], [5.0], [0.0]], requires_grad=True)
    out = aggregate(g, x, reduce="max")
    out.sum().backward()
    assert out[3].item() == 5.0
    assert x.grad.view(-1).tolist() == [0.0, 1.0, 0.0, 0.0]


def test_max_propagates_nan():
    g = Graph.from_edge_index(torch.tensor([[0, 1, 2], [3, 3, 3]]), 4)
    x = torch.tensor([[1.0], [float("nan")], [7.0], [0.0]])
    assert torch.isnan(aggregate(g, x, reduce="max")[3]).all()


def test_default_edge_weight_comes_from_graph():
    ei = torch.tensor([[0, 1], [1, 0]])
    g = Graph.from_edge_index(ei, 2, torch.tensor([2.0, 3.0]))
    x = torch.ones(2, 1)
    assert aggregate(g, x).view(-1).tolist() == [3.0, 2.0]


@pytest.mark.usefixtures("aggregate_simd")
def test_results_are_bitwise_stable_across_runs_and_threads():
    edge_index = torch.cat([random_edges(3000, 40000, seed=5), awkward_graphs()["hub"][0]], 1)
    g = Graph.from_edge_index(edge_index, 3001)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3001, 33, generator=gen, requires_grad=True)
    w = torch.rand(g.num_edges, generator=gen, requires_grad=True)
    before = torch.get_num_threads()
    results = []
    try:
        for threads in (1, 2, 3, 1):
            torch.set_num_threads(threads)
            for reduce in REDUCES:
                out = aggregate(g, x, w, reduce=reduce, norm="gcn")
                gx, gw = torch.autograd.grad(out, (x, w), torch.ones_like(out))
                results.append((threads, reduce, out, gx, gw))
    finally:
        torch.set_num_threads(before)
    first = {r[1]: r[2:] for r in results[:3]}
    for _, reduce, *tensors in results:
        for got, want in zip(tensors, first[reduce]):
            assert torch.equal(got, want)


@pytest.mark.parametrize("reduce", REDUCES)
def test_torch_compile_matches_eager(reduce):
    g = Graph.from_edge_index(random_edges(30, 150, seed=2), 30)
    x = torch.randn(30, 8, requires_grad=True)
    w = torch.rand(g.num_edges, requires_grad=True)

    def f(x, w):
        return aggregate(g, x, w, reduce=reduce, norm="gcn").relu().sum()

    # Eager calls take the autograd.Function twin, compiled ones the torch.library op: both
    # paths must agree.
    assert "Eager" in type(aggregate(g, x, w, reduce=reduce).grad_fn).__name__
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    eager_val, eager_grads = f(x, w), torch.autograd.grad(f(x, w), (x, w))
    comp_val = compiled(x, w)
    comp_grads = torch.autograd.grad(comp_val, (x, w))
    torch.testing.assert_close(comp_val, eager_val)
    for got, want in zip(comp_grads, eager_grads):
        torch.testing.assert_close(got, want)


def test_opcheck():
    g = Graph.from_edge_index(random_edges(12, 40, seed=4), 12)
    x = torch.randn(12, 5, dtype=torch.float64, requires_grad=True)
    w = torch.rand(g.num_edges, dtype=torch.float64, requires_grad=True)
    empty = g.rowptr.new_empty(0)
    colptr, csc_row, csc_edge_id = g.csc
    for mode in (_C.AggMode.SUM, _C.AggMode.MAX):
        int32 = mode == _C.AggMode.SUM  # int32 index copies only for the sum
        col32, row32 = (g.col.int(), csc_row.int()) if int32 else (None, None)
        # (The segment plans are CUDA's: None here.)
        csr = (g.rowptr, g.col, col32, g.row, empty, None)
        graph = (*csr, colptr, csc_row, row32, csc_edge_id, empty, None)
        args = (*graph, x, w, None, None, int(mode))
        torch.library.opcheck(torch.ops.galfast.aggregate.default, args)


def test_opcheck_kernel_ops():
    # The autograd-free kernel ops the backward traces: their fake kernels must allocate what the
    # kernels return (max's arg, the masked sum on the transpose, the edge gradient).
    g = Graph.from_edge_index(random_edges(12, 40, seed=5), 12)
    x = torch.randn(12, 5, dtype=torch.float64)
    w = torch.rand(g.num_edges, dtype=torch.float64)
    empty = g.rowptr.new_empty(0)
    _, arg = launch_aggregate(
        g.rowptr, g.col, None, None, w, None, None, empty, None, x, None, int(_C.AggMode.MAX)
    )
    assert arg.shape == (12, 5)
    csc = g.csc
    masked = (
        *(csc.colptr, csc.row, None, csc.edge_id, w, None, None, empty, None, x, arg),
        int(_C.AggMode.MASKED_SUM),
    )
    torch.library.opcheck(torch.ops.galfast.aggregate_kernel.default, masked)
    grad = torch.randn(12, 5, dtype=torch.float64)
    for mask in (None, arg):
        args = (g.rowptr, g.row, g.col, None, None, grad, x, mask)
        torch.library.opcheck(torch.ops.galfast.edge_grad.default, args)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"reduce": "min"}, "reduce"),
        ({"norm": "sym"}, "norm"),
    ],
)
def test_bad_options(kwargs, message):
    g = Graph.from_edge_index(torch.tensor([[0], [1]]), 2)
    with pytest.raises(ValueError, match=message):
        aggregate(g, torch.ones(2, 3), **kwargs)


def test_bad_inputs():
    g = Graph.from_edge_index(torch.tensor([[0], [1]]), 2)
    with pytest.raises(ValueError, match="rows but the graph has 2"):
        aggregate(g, torch.ones(3, 3))
    with pytest.raises(ValueError, match="shape"):
        aggregate(g, torch.ones(2))
    with pytest.raises(ValueError, match="int64"):
        aggregate(g, torch.ones(2, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match="float16"):
        aggregate(g, torch.ones(2, 3, dtype=torch.float16))
    with pytest.raises(ValueError, match=r"shape \[1\]"):
        aggregate(g, torch.ones(2, 3), torch.ones(4))
    with pytest.raises(ValueError, match="galfast.Graph"):
        aggregate(torch.tensor([[0], [1]]), torch.ones(2, 3))
    with pytest.raises(ValueError, match="torch.Tensor"):
        aggregate(g, [[1.0, 2.0], [3.0, 4.0]])


def test_build_info_reports_the_build():
    import galfast

    info = galfast.build_info()
    assert set(info) >= {"version", "cuda", "cuda_archs", "openmp", "compiler"}
    assert info["version"] == galfast.__version__
    assert isinstance(info["cuda"], bool) and isinstance(info["openmp"], bool)
    assert bool(info["cuda_archs"]) == info["cuda"]


@pytest.mark.usefixtures("aggregate_simd")
@pytest.mark.parametrize(
    "f", [1, 4, 8, 12, 16, 20, 24, 28, 31, 32, 48, 60, 64, 65, 100, 128, 130, 256]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_every_feature_tiling_matches_reference(f, dtype):
    # The CPU sum covers F with 256-byte register tiles, then one pass over the rest ending in
    # a vector that overlaps the one before it (tests/test_aggregate_sum_tiles.py has every F
    # to 40); max runs feature by feature.
    g = Graph.from_edge_index(random_edges(50, 400, seed=f), 50)
    x = torch.randn(50, f, dtype=dtype)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {}
    for reduce in REDUCES:
        torch.testing.assert_close(
            aggregate(g, x, reduce=reduce, norm="gcn"),
            _ref_for(g, x, None, reduce, "gcn"),
            **tol,
        )
