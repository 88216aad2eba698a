"""GATConv's edge features (edge_dim / edge_attr / fill_value, fused into the kernel) and
return_attention_weights, against PyG; the kernel's edge term against the reference."""

from __future__ import annotations

import pytest
import torch
from _layer_cases import awkward_graphs
from _pyg_compat_cases import compare_layers
from ref_gat_aggregate import gat_aggregate_reference

import galfast
from galfast import nn as gnn
from galfast.ops import gat_aggregate
from galfast.ops.gat_aggregate import _gat_backward_op, _gat_forward_op

pyg_nn = pytest.importorskip("torch_geometric.nn")

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CS. tensor support is in beta")

GRAPHS = awkward_graphs()
NAMES = ["random", "isolated", "loops_duplicates", "hub", "no_edges"]


def _inputs(name, edge_dim):
    edge_index, n = GRAPHS[name]
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(n, 8, generator=gen)
    shape = (edge_index.size(1),) if edge_dim == 1 else (edge_index.size(1), edge_dim)
    return edge_index, {"x": x, "attr": torch.randn(*shape, generator=gen)}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("fill_value", ["mean", "add", "max", "min", "mul", 0.5, "tensor"], ids=str)
def test_edge_features_match_pyg(name, fill_value):
    if fill_value == "tensor":
        fill_value = torch.tensor([0.3, -1.0, 2.0])
    edge_index, inputs = _inputs(name, 3)
    # The hub's added loop reduces ~1100 edge features: float32 rounding of that sum differs
    # between the two (PyG projects every edge, galfast folds the projection first), so the
    # hub is compared in float64, where both agree to rounding (1e-9 while the loops' mean
    # weights were float32 whatever the layer's dtype).
    dtype, tol = (torch.float64, 1e-12) if name == "hub" else (torch.float32, 1e-5)
    inputs = {k: v.to(dtype) for k, v in inputs.items()}
    if isinstance(fill_value, torch.Tensor):
        fill_value = fill_value.to(dtype)

    def make(lib):
        return lib.GATConv(8, 4, heads=2, edge_dim=3, fill_value=fill_value).to(dtype)

    call = lambda conv, t: conv(t["x"], edge_index, t["attr"])  # noqa: E731
    compare_layers(make(pyg_nn), make(gnn), inputs, call, atol=tol, rtol=tol * 10)


@pytest.mark.parametrize("fill_value", ["mean", "add"])
def test_float64_loop_terms_are_exact(fill_value):
    # A node with 3 in-edges: its loop's mean weight 1/3 was rounded to float32 (1.4e-9 off).
    edge_index = torch.tensor([[1, 2, 3, 0], [0, 0, 0, 1]])
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(4, 5, generator=gen, dtype=torch.float64)
    attr = torch.rand(4, 1, generator=gen, dtype=torch.float64)

    def make(lib):
        return lib.GATConv(5, 3, edge_dim=1, fill_value=fill_value).double()

    call = lambda conv, t: conv(t["x"], edge_index, t["attr"])  # noqa: E731
    compare_layers(make(pyg_nn), make(gnn), {"x": x, "attr": attr}, call, atol=1e-13, rtol=1e-12)


@pytest.mark.parametrize("flow", ["source_to_target", "target_to_source"])
def test_cached_edge_term_layout_follows_the_input(flow):
    """The gather that puts the edge terms (loops included) in CSR order is cached on the
    looped graph: reused for the same edge_index, rebuilt for another one (here the same
    edges in another order, whose edge_attr rows move with them)."""
    edge_index, inputs = _inputs("loops_duplicates", 3)
    perm = torch.randperm(edge_index.size(1), generator=torch.Generator().manual_seed(8))
    pyg, ours = (lib.GATConv(8, 4, heads=2, edge_dim=3, flow=flow) for lib in (pyg_nn, gnn))
    for index, attr in ((edge_index, inputs["attr"]), (edge_index[:, perm], inputs["attr"][perm])):
        given = {"x": inputs["x"], "attr": attr}

        def call(conv, t, index=index):
            return conv(t["x"], index, t["attr"])

        for _ in range(2):  # the second call reads the cached layout
            compare_layers(pyg, ours, given, call)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(heads=1, edge_dim=1),
        dict(heads=3, concat=False, edge_dim=1, fill_value=2.0),
        dict(heads=2, edge_dim=1, add_self_loops=False),
        dict(heads=2, edge_dim=1, residual=True, negative_slope=0.05),
    ],
    ids=["one_head", "mean_heads", "no_loops", "residual"],
)
def test_one_dimensional_edge_attr_matches_pyg(kwargs):
    edge_index, inputs = _inputs("loops_duplicates", 1)
    call = lambda conv, t: conv(t["x"], edge_index, t["attr"])  # noqa: E731
    compare_layers(pyg_nn.GATConv(8, 4, **kwargs), gnn.GATConv(8, 4, **kwargs), inputs, call)


def test_bipartite_edge_features_match_pyg():
    gen = torch.Generator().manual_seed(2)
    edge_index = torch.stack(
        [torch.randint(0, 9, (25,), generator=gen), torch.randint(0, 5, (25,), generator=gen)]
    )
    inputs = {
        "src": torch.randn(9, 6, generator=gen),
        "dst": torch.randn(5, 4, generator=gen),
        "attr": torch.randn(25, 2, generator=gen),
    }
    make = lambda lib: lib.GATConv((6, 4), 3, heads=2, edge_dim=2)  # noqa: E731
    call = lambda conv, t: conv((t["src"], t["dst"]), edge_index, t["attr"])  # noqa: E731
    compare_layers(make(pyg_nn), make(gnn), inputs, call)


def test_edge_attr_follows_flow():
    edge_index, inputs = _inputs("random", 3)
    make = lambda lib: lib.GATConv(8, 4, heads=2, edge_dim=3, flow="target_to_source")  # noqa: E731
    call = lambda conv, t: conv(t["x"], edge_index, t["attr"])  # noqa: E731
    compare_layers(make(pyg_nn), make(gnn), inputs, call)


@pytest.mark.parametrize("name", ["random", "loops_duplicates", "isolated"])
@pytest.mark.parametrize("add_self_loops", [True, False])
@pytest.mark.parametrize("edge_dim", [None, 3])
def test_attention_weights_match_pyg(name, add_self_loops, edge_dim):
    edge_index, inputs = _inputs(name, 3)
    kwargs = dict(heads=2, add_self_loops=add_self_loops, edge_dim=edge_dim)
    pyg, ours = pyg_nn.GATConv(8, 4, **kwargs), gnn.GATConv(8, 4, **kwargs)
    ours.load_state_dict(pyg.state_dict())
    attr = inputs["attr"] if edge_dim else None
    out_p, (ei_p, alpha_p) = pyg(inputs["x"], edge_index, attr, return_attention_weights=True)
    out_o, (ei_o, alpha_o) = ours(inputs["x"], edge_index, attr, return_attention_weights=True)
    torch.testing.assert_close(out_o, out_p, atol=1e-5, rtol=1e-4)
    assert torch.equal(ei_o, ei_p)  # the same edges in PyG's order
    torch.testing.assert_close(alpha_o, alpha_p, atol=1e-6, rtol=1e-4)

    # Gradients through the returned coefficients, too.
    def call(conv, t):
        attr = t["attr"] if edge_dim else None
        return conv(t["x"], edge_index, attr, return_attention_weights=True)[1][1]

    compare_layers(pyg, ours, inputs, call)


def test_attention_weights_for_sparse_and_graph_inputs():
    edge_index = torch.tensor([[0, 1, 2, 3], [0, 0, 1, 1]])
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    conv = gnn.GATConv(8, 4, heads=2)
    adj_t = torch.sparse_coo_tensor(
        edge_index.flip(0), torch.ones(4), (4, 4), check_invariants=True
    )
    out, (ei, alpha) = conv(x, edge_index, return_attention_weights=True)
    for adj in (adj_t.coalesce(), adj_t.coalesce().to_sparse_csr()):
        out_s, (adj_alpha, alpha_s) = conv(x, adj, return_attention_weights=True)
        torch.testing.assert_close(out_s, out)
        assert adj_alpha.shape == (4, 4, 2) and adj_alpha._nnz() == 7
        dense = adj_alpha.to_dense()
        torch.testing.assert_close(dense[ei[1], ei[0]], alpha)  # entry (target, source)
    graph = galfast.Graph.from_edge_index(edge_index, 4)
    out_g, (ei_g, alpha_g) = conv(x, graph, return_attention_weights=True)
    torch.testing.assert_close(out_g, out)
    sums = torch.zeros(4, 2).index_add(0, ei_g[1], alpha_g)
    torch.testing.assert_close(sums, torch.ones(4, 2))


def test_attention_weights_with_dropout_are_the_ones_used():
    edge_index, inputs = _inputs("random", 3)
    conv = gnn.GATConv(8, 4, heads=2, dropout=0.5, add_self_loops=False)
    out, (ei, alpha) = conv(inputs["x"], edge_index, return_attention_weights=True)
    h = conv.lin(inputs["x"]).view(-1, 2, 4)
    expected = torch.zeros(h.shape).index_add(0, ei[1], alpha.unsqueeze(-1) * h[ei[0]])
    torch.testing.assert_close(out, expected.flatten(1) + conv.bias)
    assert (alpha == 0).any()


def test_edge_attr_refusals():
    edge_index, inputs = _inputs("random", 3)
    conv = gnn.GATConv(8, 4, edge_dim=3)
    with pytest.raises(ValueError, match="one row per edge"):
        conv(inputs["x"], edge_index, inputs["attr"][:-1])
    adj_t = torch.sparse_coo_tensor(
        edge_index.flip(0), torch.ones(edge_index.size(1)), (20, 20), check_invariants=True
    )
    with pytest.raises(NotImplementedError, match="add_self_loops"):
        conv(inputs["x"], adj_t, inputs["attr"])


def _kernel_inputs(graph, heads=2, features=3, dtype=torch.float64):
    gen = torch.Generator().manual_seed(9)
    make = lambda *shape: torch.randn(*shape, dtype=dtype, generator=gen).requires_grad_(True)  # noqa: E731
    n = graph.num_nodes
    return make(n, heads, features), make(n, heads), make(n, heads), make(graph.num_edges, heads)


@pytest.mark.parametrize("name", NAMES)
def test_kernel_edge_term_matches_reference(name):
    edge_index, n = GRAPHS[name]
    graph = galfast.nn._graph_input.layer_graph(edge_index, n).graph
    h, a_src, a_dst, a_edge = _kernel_inputs(graph)
    out = gat_aggregate(graph, h, a_src, a_dst, a_edge)
    expected = gat_aggregate_reference(graph, h, a_src, a_dst, 0.2, alpha_edge=a_edge)
    torch.testing.assert_close(out, expected)
    upstream = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(1))
    got = torch.autograd.grad((out * upstream).sum(), (h, a_src, a_dst, a_edge))
    want = torch.autograd.grad((expected * upstream).sum(), (h, a_src, a_dst, a_edge))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def test_kernel_edge_term_gradcheck_and_opcheck():
    edge_index, n = GRAPHS["loops_duplicates"]
    graph = galfast.nn._graph_input.layer_graph(edge_index, n).graph
    inputs = _kernel_inputs(graph)
    torch.autograd.gradcheck(lambda *t: gat_aggregate(graph, *t), inputs)
    torch.autograd.gradcheck(lambda *t: gat_aggregate(graph, *t, dropout=0.3, seed=4), inputs)
    h, a_src, a_dst, a_edge = (t.detach().float() for t in inputs)
    csc = graph.csc
    args = (graph.rowptr, graph.col, *csc, graph.csc_slot, h, a_src, a_dst, a_edge, 0.2, 0.3, 7)
    torch.library.opcheck(_gat_forward_op, args)
    out, lse = _gat_forward_op(*args)
    backward_args = (*args[:10], out, lse, torch.randn_like(out), 0.2, 0.3, 7)
    torch.library.opcheck(_gat_backward_op, backward_args)


def test_kernel_edge_term_bad_shapes():
    edge_index, n = GRAPHS["random"]
    graph = galfast.nn._graph_input.layer_graph(edge_index, n).graph
    h, a_src, a_dst, a_edge = (t.detach() for t in _kernel_inputs(graph))
    with pytest.raises(ValueError, match="alpha_edge must have shape"):
        gat_aggregate(graph, h, a_src, a_dst, a_edge[:-1])
    with pytest.raises(ValueError, match="alpha_edge is torch.float32"):
        gat_aggregate(graph, h, a_src, a_dst, a_edge.float())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", ["loops_duplicates", "hub"])
def test_kernel_edge_term_cuda_matches_cpu(name):
    edge_index, n = GRAPHS[name]
    graph = galfast.nn._graph_input.layer_graph(edge_index, n).graph
    inputs = [t.detach().float().requires_grad_(True) for t in _kernel_inputs(graph)]
    on_gpu = [t.detach().cuda().requires_grad_(True) for t in inputs]
    out = gat_aggregate(graph, *inputs)
    out_gpu = gat_aggregate(graph.to("cuda"), *on_gpu)
    torch.testing.assert_close(out_gpu.cpu(), out, atol=1e-5, rtol=1e-4)
    upstream = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    (out * upstream).sum().backward()
    (out_gpu * upstream.cuda()).sum().backward()
    for cpu, gpu in zip(inputs, on_gpu):
        torch.testing.assert_close(gpu.grad.cpu(), cpu.grad, atol=1e-4, rtol=1e-4)
