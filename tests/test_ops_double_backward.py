"""Second derivatives through galfast's ops (create_graph=True: gradient penalties, Hessian-
vector products): the same numbers as plain PyTorch, or a RuntimeError naming the op where no
second derivative exists, never a silently missing term. Their kernels' backward records no
graph of their own, so a penalty's gradient once left out every term through the op."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import gradgradcheck

from galfast import Graph
from galfast.nn import NNConv
from galfast.ops import (
    aggregate,
    batch_norm,
    bilinear_edge_scores,
    block_aggregate,
    compgcn_aggregate,
    gat_aggregate,
    nnconv_aggregate,
    sample_neighbors,
)

EDGES = torch.tensor([[0, 1, 2, 0, 3, 2, 4], [1, 2, 0, 2, 2, 2, 0]])  # self loop, node 4 no in
NUM_NODES = 6  # node 5 isolated


def _graph() -> Graph:
    return Graph.from_edge_index(EDGES, num_nodes=NUM_NODES)


def _penalty_grads(layer, params: list[torch.Tensor], x: torch.Tensor) -> tuple:
    """d/dparams of ||d loss / dx||^2 for loss = sum(tanh(layer(x)))."""
    x = x.clone().requires_grad_()
    (grad_x,) = torch.autograd.grad(layer(x).tanh().sum(), x, create_graph=True)
    return torch.autograd.grad(grad_x.square().sum(), params)


def _dense_aggregate(graph: Graph, h, weight, reduce: str):
    """The reference: messages w_e h[col[e]] reduced per destination row with torch ops."""
    messages = weight.unsqueeze(1) * h[graph.col]
    index = graph.row.unsqueeze(1).expand_as(messages)
    if reduce == "max":
        out = h.new_full((graph.num_nodes, h.size(1)), -torch.inf)
        out = out.scatter_reduce(0, index, messages, "amax")
        return out.masked_fill(out == -torch.inf, 0.0)
    out = h.new_zeros(graph.num_nodes, h.size(1)).index_add(0, graph.row, messages)
    if reduce == "mean":
        out = out / graph.in_degree.clamp_min(1).unsqueeze(1).to(h.dtype)
    return out


@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_aggregate_gradient_penalty_matches_torch(reduce):
    # Features and weights both come from the parameters: the penalty's gradient has terms
    # through x, through the weights and through grad_out.
    graph = _graph()
    gen = torch.Generator().manual_seed(0)
    lin = torch.randn(3, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    att = torch.randn(4, dtype=torch.float64, generator=gen, requires_grad=True)
    x = torch.randn(NUM_NODES, 3, dtype=torch.float64, generator=gen)

    def layer(fn):
        def run(x):
            h = x @ lin
            weight = torch.sigmoid((h[graph.col] * att).sum(1))
            return fn(graph, h, weight, reduce)

        return run

    fused = _penalty_grads(layer(lambda g, h, w, r: aggregate(g, h, w, reduce=r)), [lin, att], x)
    expected = _penalty_grads(layer(_dense_aggregate), [lin, att], x)
    for got, want in zip(fused, expected):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
@pytest.mark.parametrize("norm", [None, "gcn"])
def test_aggregate_gradgradcheck(reduce, norm):
    graph = _graph()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(NUM_NODES, 2, dtype=torch.float64, generator=gen, requires_grad=True)
    w = torch.rand(graph.num_edges, dtype=torch.float64, generator=gen, requires_grad=True)
    assert gradgradcheck(lambda x, w: aggregate(graph, x, w, reduce=reduce, norm=norm), (x, w))


@pytest.mark.parametrize("reduce", ["sum", "max"])
def test_aggregate_without_edges_has_zero_second_derivative(reduce):
    graph = Graph.from_edge_index(torch.zeros(2, 0, dtype=torch.long), num_nodes=3)
    x = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    assert gradgradcheck(lambda x: aggregate(graph, x, reduce=reduce), (x,))


@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_block_aggregate_gradgradcheck(reduce):
    big = Graph.from_edge_index(torch.randint(0, 20, (2, 120), generator=_gen(2)), num_nodes=20)
    (block,) = sample_neighbors(big, torch.tensor([0, 5, 7]), [4], seed=1)
    x = torch.randn(block.num_src, 2, dtype=torch.float64, requires_grad=True)
    w = torch.rand(block.num_edges, dtype=torch.float64, requires_grad=True)
    assert gradgradcheck(lambda x, w: block_aggregate(block, x, w, reduce=reduce), (x, w))


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _dense_gat(graph: Graph, h, alpha_src, alpha_dst, negative_slope=0.2):
    logits = torch.nn.functional.leaky_relu(
        alpha_src[graph.col] + alpha_dst[graph.row], negative_slope
    )
    index = graph.row.unsqueeze(1).expand_as(logits)
    top = logits.new_full((graph.num_nodes, h.size(1)), -torch.inf)
    top = top.scatter_reduce(0, index, logits.detach(), "amax")
    weights = torch.exp(logits - top[graph.row])
    total = logits.new_zeros(graph.num_nodes, h.size(1)).index_add(0, graph.row, weights)
    messages = (weights / total[graph.row]).unsqueeze(-1) * h[graph.col]
    return h.new_zeros(graph.num_nodes, *h.shape[1:]).index_add(0, graph.row, messages)


def test_gat_aggregate_gradient_penalty_matches_torch():
    # GATConv's shape of use: the logits are computed from the same features h, so a second
    # derivative must not count the path from the logits back to h twice.
    graph = _graph()
    gen = _gen(3)
    lin = torch.randn(3, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    att = torch.randn(2, 2, 2, dtype=torch.float64, generator=gen, requires_grad=True)
    x = torch.randn(NUM_NODES, 3, dtype=torch.float64, generator=gen)

    def layer(fn):
        def run(x):
            h = (x @ lin).view(-1, 2, 2)
            return fn(graph, h, (h * att[0]).sum(-1), (h * att[1]).sum(-1)).flatten(1)

        return run

    fused = _penalty_grads(layer(gat_aggregate), [lin, att], x)
    expected = _penalty_grads(layer(_dense_gat), [lin, att], x)
    for got, want in zip(fused, expected):
        torch.testing.assert_close(got, want)


def test_gat_aggregate_gradgradcheck_with_edge_term():
    graph = _graph()
    gen = _gen(4)
    h = torch.randn(NUM_NODES, 2, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    a_src, a_dst = (
        torch.randn(NUM_NODES, 2, dtype=torch.float64, generator=gen, requires_grad=True)
        for _ in range(2)
    )
    a_edge = torch.randn(graph.num_edges, 2, dtype=torch.float64, generator=gen)
    a_edge.requires_grad_()
    assert gradgradcheck(lambda *t: gat_aggregate(graph, *t), (h, a_src, a_dst, a_edge))


def test_gat_aggregate_with_dropout_refuses_a_second_derivative():
    graph = _graph()
    h = torch.randn(NUM_NODES, 1, 2, dtype=torch.float64, requires_grad=True)
    alpha = torch.randn(NUM_NODES, 1, dtype=torch.float64, requires_grad=True)
    out = gat_aggregate(graph, h, alpha, alpha, dropout=0.5, seed=3)
    (grad_h,) = torch.autograd.grad(out.square().sum(), h, create_graph=True)
    (plain,) = torch.autograd.grad(out.square().sum(), h, retain_graph=True)
    torch.testing.assert_close(grad_h, plain)  # the first derivative itself is unchanged
    with pytest.raises(RuntimeError, match="gat_aggregate with dropout > 0 is differentiable once"):
        grad_h.square().sum().backward()


def test_batch_norm_gradient_penalty_matches_torch():
    gen = _gen(5)
    lin = torch.randn(3, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    weight = torch.rand(4, dtype=torch.float64, generator=gen, requires_grad=True)
    bias = torch.rand(4, dtype=torch.float64, generator=gen, requires_grad=True)
    x = torch.randn(7, 3, dtype=torch.float64, generator=gen)

    def layer(fn):
        return lambda x: fn(x @ lin, weight, bias)

    def torch_batch_norm(x, w, b):
        return torch.nn.functional.batch_norm(x, None, None, w, b, training=True)

    params = [lin, weight, bias]
    fused = _penalty_grads(layer(batch_norm), params, x)
    expected = _penalty_grads(layer(torch_batch_norm), params, x)
    for got, want in zip(fused, expected):
        torch.testing.assert_close(got, want)


def _torch_bilinear_scores(z, src, dst, bases, coefficients):
    per_basis = torch.einsum("bi,sij,bj->bs", z[src], bases, z[dst])
    return per_basis @ coefficients.t()


def test_edge_scores_penalty_with_inputs_computed_from_each_other():
    # coefficients computed from z: each input's own partial derivative, counted once
    gen = _gen(6)
    lin = torch.randn(3, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    bases = torch.randn(2, 3, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    x = 0.3 * torch.randn(5, 3, dtype=torch.float64, generator=gen)  # tanh not saturated
    src, dst = torch.tensor([0, 1, 2]), torch.tensor([3, 4, 0])

    def layer(fn):
        def run(x):
            z = x @ lin
            return fn(z, src, dst, bases, z[:2, :2] * 1.0)

        return run

    fused = _penalty_grads(layer(bilinear_edge_scores), [lin, bases], x)
    expected = _penalty_grads(layer(_torch_bilinear_scores), [lin, bases], x)
    for got, want in zip(fused, expected):
        torch.testing.assert_close(got, want)


def _typed_graph() -> Graph:
    edge_type = torch.tensor([0, 1, 2, 0, 1, 1, 2])  # relation 3 unused
    return Graph.from_edge_index(EDGES, num_nodes=NUM_NODES, edge_type=edge_type)


@pytest.mark.parametrize("composition", ["sub", "mult", "corr"])
@pytest.mark.parametrize("norm", [None, "gcn"])
def test_compgcn_aggregate_gradgradcheck(composition, norm):
    graph = _typed_graph()
    x = torch.randn(NUM_NODES, 4, dtype=torch.float64, generator=_gen(3), requires_grad=True)
    rel = torch.randn(4, 4, dtype=torch.float64, generator=_gen(4), requires_grad=True)
    weight = torch.rand(graph.num_edges, dtype=torch.float64, generator=_gen(5))

    def op(x, rel):
        return compgcn_aggregate(graph, x, rel, weight, composition=composition, norm=norm)

    assert gradgradcheck(op, (x, rel))


def _dense_compgcn(graph: Graph, x, rel, composition: str):
    source, relation = x[graph.col], rel[graph.edge_type]
    if composition == "corr":  # (x * z)_k = sum_l x_l z_(l + k) mod F
        shifts = torch.stack([relation.roll(-k, 1) for k in range(x.size(1))], 1)
        messages = (source.unsqueeze(1) * shifts).sum(2)
    else:
        messages = source - relation if composition == "sub" else source * relation
    return x.new_zeros(graph.num_nodes, x.size(1)).index_add(0, graph.row, messages)


@pytest.mark.parametrize("composition", ["sub", "mult", "corr"])
def test_compgcn_aggregate_gradient_penalty_matches_torch(composition):
    # The relation embeddings come from the features' parameters too (CompGCN updates both).
    graph = _typed_graph()
    lin = torch.randn(3, 4, dtype=torch.float64, generator=_gen(6), requires_grad=True)
    x = torch.randn(NUM_NODES, 3, dtype=torch.float64, generator=_gen(7))

    def layer(fn):
        def run(x):
            h = x @ lin
            return fn(graph, h, h[:4] * 0.5, composition)

        return run

    def fused(graph, h, rel, composition):
        return compgcn_aggregate(graph, h, rel, composition=composition)

    got = _penalty_grads(layer(fused), [lin], x)
    want = _penalty_grads(layer(_dense_compgcn), [lin], x)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("edges", [True, False], ids=["graph", "no-edges"])
def test_nnconv_aggregate_gradgradcheck(reduce, with_bias, edges):
    # Without edges the double backward's view(0, F_in, -1) could not infer its last size.
    graph = _graph() if edges else Graph.from_edge_index(torch.zeros(2, 0, dtype=torch.long), 5)
    x = torch.randn(graph.num_nodes, 2, dtype=torch.float64, generator=_gen(8))
    x.requires_grad_()
    h = torch.randn(graph.num_edges, 3, dtype=torch.float64, generator=_gen(9), requires_grad=True)
    weight = torch.randn(4, 3, dtype=torch.float64, generator=_gen(10), requires_grad=True)
    bias = torch.randn(4, dtype=torch.float64, generator=_gen(11), requires_grad=True)
    inputs = (x, h, weight, bias) if with_bias else (x, h, weight)
    assert gradgradcheck(lambda *t: nnconv_aggregate(graph, *t, reduce=reduce), inputs)


def test_nnconv_layer_gradient_penalty_matches_pyg():
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    torch.manual_seed(0)
    edge_net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 6))
    ours = NNConv(2, 3, edge_net, aggr="mean").double()
    theirs = pyg_nn.NNConv(2, 3, edge_net, aggr="mean").double()
    theirs.load_state_dict(ours.state_dict())
    edge_attr = torch.randn(EDGES.size(1), 2, dtype=torch.float64, generator=_gen(12))
    x = torch.randn(NUM_NODES, 2, dtype=torch.float64, generator=_gen(13))
    params = list(ours.parameters())
    got = _penalty_grads(lambda x: ours(x, EDGES, edge_attr), params, x)
    want = _penalty_grads(lambda x: theirs(x, EDGES, edge_attr), list(theirs.parameters()), x)
    torch.testing.assert_close(got, want)
