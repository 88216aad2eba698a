"""galfast.nn.ChebConv against torch_geometric's ChebConv (same weights, same inputs)."""

from __future__ import annotations

import pytest
import torch
from _layer_cases import assert_same_layer, awkward_graphs, graph_ids, positive_weights

import galfast
from galfast.nn import ChebConv

pyg_nn = pytest.importorskip("torch_geometric.nn")

GRAPHS = awkward_graphs()


def _x(num_nodes: int) -> torch.Tensor:
    return torch.randn(num_nodes, 8, generator=torch.Generator().manual_seed(1))


def _lambda_max(name: str, normalization):
    # Without edges L = D - A is 0, so the default lambda_max = 2 max L_ij is 0 and PyG
    # divides by it (NaN); give one there.
    return 2.0 if normalization is None and name == "no_edges" else None


@pytest.mark.parametrize("name", graph_ids())
@pytest.mark.parametrize("normalization", ["sym", "rw", None])
@pytest.mark.parametrize("K", [1, 2, 3])
def test_matches_pyg(name, normalization, K):
    edge_index, n = GRAPHS[name]
    x = _x(n)
    lam = _lambda_max(name, normalization)
    pyg = pyg_nn.ChebConv(8, 6, K=K, normalization=normalization)
    ours = ChebConv(8, 6, K=K, normalization=normalization)
    args = (x, edge_index, None, None, lam)  # PyG's order: edge_weight, batch, lambda_max
    assert_same_layer(pyg, ours, x, args, args)


@pytest.mark.parametrize("name", graph_ids())
@pytest.mark.parametrize("normalization", ["sym", "rw", None])
def test_matches_pyg_weighted(name, normalization):
    edge_index, n = GRAPHS[name]
    x, w = _x(n), positive_weights(edge_index.size(1))
    lam = _lambda_max(name, normalization)
    pyg = pyg_nn.ChebConv(8, 6, K=3, normalization=normalization)
    ours = ChebConv(8, 6, K=3, normalization=normalization)
    assert_same_layer(pyg, ours, x, (x, edge_index, w, None, lam), (x, edge_index, w, None, lam), w)


@pytest.mark.parametrize("lambda_max", [1.5, torch.tensor(3.0)], ids=["float", "tensor"])
def test_matches_pyg_with_lambda_max(lambda_max):
    edge_index, n = GRAPHS["random"]
    x = _x(n)
    pyg = pyg_nn.ChebConv(8, 6, K=3)
    args = (x, edge_index, None, None, lambda_max)
    assert_same_layer(pyg, ChebConv(8, 6, K=3), x, args, args)


def test_graph_input_equals_edge_index_input():
    edge_index, n = GRAPHS["loops_duplicates"]
    conv = ChebConv(8, 6, K=3)
    # Self loops are dropped and parallel edges add up, so the coalesced Graph is the same.
    graph = galfast.Graph.from_edge_index(edge_index, n, torch.ones(edge_index.size(1)))
    torch.testing.assert_close(conv(_x(n), graph), conv(_x(n), edge_index))


def test_bad_arguments():
    with pytest.raises(ValueError, match="K must be"):
        ChebConv(4, 4, K=0)
    with pytest.raises(ValueError, match="normalization"):
        ChebConv(4, 4, K=2, normalization="both")
    edge_index, n = GRAPHS["random"]
    with pytest.raises(ValueError, match="single value"):
        ChebConv(8, 6, K=2)(_x(n), edge_index, lambda_max=torch.ones(2))


def test_symmetric_degrees_take_the_gcn_form_and_agree_with_the_weighted_form():
    from galfast.nn.norm import cheb_gcn_form, cheb_norm

    symmetric = galfast.Graph.from_edge_index(GRAPHS["random"][0], 20, symmetrize=True)
    directed = galfast.Graph.from_edge_index(GRAPHS["random"][0], 20)
    assert cheb_gcn_form(symmetric) is not None
    assert cheb_gcn_form(directed) is None  # in- and out-degrees differ
    assert cheb_gcn_form(symmetric, lambda_max=1.5) is None
    assert cheb_gcn_form(symmetric, normalization="rw") is None
    x = _x(20)
    fast = -galfast.ops.aggregate(cheb_gcn_form(symmetric), x, norm="gcn")
    target, off, diag = cheb_norm(symmetric)
    torch.testing.assert_close(fast, galfast.ops.aggregate(target, x, off) + diag[:, None] * x)


@pytest.mark.parametrize("K", [2, 3, 4, 5])
def test_gcn_form_puts_the_laplacian_sign_on_the_weights_bitwise(K):
    # Issue 19: -aggregate(...) negated [N, F] features forward and backward every step; the
    # sign now goes onto the odd terms' weights. The same output bit for bit, and the same
    # gradient terms (for K > 2 autograd may add x's three terms in another order).
    from torch.utils._python_dispatch import TorchDispatchMode

    from galfast.nn.norm import cheb_gcn_form

    graph = galfast.Graph.from_edge_index(GRAPHS["random"][0], 20, symmetrize=True)
    conv = ChebConv(8, 6, K=K)
    x = _x(20).requires_grad_()
    negated = []

    class RecordNegations(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.neg.default:
                negated.append(tuple(args[0].shape))
            return func(*args, **(kwargs or {}))

    with RecordNegations():
        out = conv(x, graph)
        out.backward(torch.ones_like(out))
    # Only the recursion's "- Z_{k-2}" negates features (in backward), once per term k >= 2.
    assert negated.count((20, 8)) == K - 2 and (20, 6) not in negated

    x_ref = x.detach().clone().requires_grad_()
    laplacian = lambda z: -galfast.ops.aggregate(cheb_gcn_form(graph), z, norm="gcn")  # noqa: E731
    previous, current = x_ref, laplacian(x_ref)
    ref = conv.lins[0](x_ref) + conv.lins[1](current)
    for lin in conv.lins[2:]:
        previous, current = current, 2.0 * laplacian(current) - previous
        ref = ref + lin(current)
    ref = ref + conv.bias
    ref.backward(torch.ones_like(ref))
    assert torch.equal(out, ref)
    if K == 2:
        assert torch.equal(x.grad, x_ref.grad)
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-6, atol=1e-6)


def test_negative_degree_under_sym_names_the_cause():
    """Negative edge weights can make a weighted degree negative; 'sym' then has no D^-1/2
    (PyG's output is all NaN). The error says so instead of blaming the (finite) weights,
    and the normalisations defined there still match PyG."""
    edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])
    x, w = _x(5), torch.tensor([-0.8, -0.1, 0.7, -0.3])
    with pytest.raises(ValueError, match="node 0 has a negative weighted out-degree"):
        ChebConv(8, 6, K=2)(x, edge_index, w)
    for normalization in ("rw", None):
        args = (x, edge_index, w, None, None)
        pyg = pyg_nn.ChebConv(8, 6, K=2, normalization=normalization)
        assert_same_layer(pyg, ChebConv(8, 6, K=2, normalization=normalization), x, args, args, w)
