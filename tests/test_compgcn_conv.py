import copy

import pytest
import torch
from ref_compgcn import compgcn_conv_ref

from galfast.nn import CompGCNConv, CompGCNGraphs, compgcn_graphs

COMPOSITIONS = ["sub", "mult", "corr"]


def _kg(num_nodes=25, num_triples=120, num_relations=4, seed=0):
    """Random triples with a hub entity, a self-loop triple, a repeated triple, isolated
    entities (the last 3 ids) and an unused relation (the last one)."""
    gen = torch.Generator().manual_seed(seed)
    heads = torch.randint(0, num_nodes - 3, (num_triples,), generator=gen)
    tails = torch.randint(0, num_nodes - 3, (num_triples,), generator=gen)
    types = torch.randint(0, num_relations - 1, (num_triples,), generator=gen)
    heads[:30] = 0  # hub
    tails[30], heads[30] = 5, 5  # self loop
    heads[31], tails[31], types[31] = heads[32], tails[32], types[32]  # repeated triple
    return torch.stack([heads, tails]), types


def _inputs(layer, seed=1, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(25, layer.in_channels, generator=gen, dtype=dtype, requires_grad=True)
    rel = torch.randn(2 * layer.num_relations, layer.in_channels, generator=gen, dtype=dtype)
    return x, rel.requires_grad_()


def _compare(layer, edge_index, edge_type, x, rel, tol):
    twin = copy.deepcopy(layer)  # own BN running statistics
    torch.manual_seed(5)
    got = layer(x, edge_index, edge_type, rel)
    torch.manual_seed(5)
    want = compgcn_conv_ref(twin, x, edge_index, edge_type, rel)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, **tol)
    weights = torch.randn(got[0].shape), torch.randn(got[1].shape)
    params = [x, rel, *layer.parameters()]
    twin_params = [x, rel, *twin.parameters()]
    grads = torch.autograd.grad(got, params, weights)
    twin_grads = torch.autograd.grad(want, twin_params, weights)
    for a, b in zip(grads, twin_grads):
        torch.testing.assert_close(a, b, **tol)
    if layer.bn is not None:
        torch.testing.assert_close(layer.bn.running_mean, twin.bn.running_mean, **tol)


@pytest.mark.parametrize("composition", COMPOSITIONS)
@pytest.mark.parametrize("train", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_matches_reference_layer(composition, train, bias):
    # Training mode with dropout: both draw the same masks under the same seed.
    torch.manual_seed(0)
    layer = CompGCNConv(12, 9, num_relations=4, composition=composition, dropout=0.3, bias=bias)
    layer.train(train)
    x, rel = _inputs(layer)
    _compare(layer, *_kg(), x, rel, {"rtol": 1e-4, "atol": 1e-5})


@pytest.mark.parametrize("composition", COMPOSITIONS)
def test_matches_reference_in_float64_without_batch_norm(composition):
    torch.manual_seed(0)
    layer = CompGCNConv(
        8, 8, num_relations=4, composition=composition, batch_norm=False, act=torch.tanh
    ).double()
    x, rel = _inputs(layer, dtype=torch.float64)
    _compare(layer.eval(), *_kg(), x, rel, {})


@pytest.mark.parametrize("composition", COMPOSITIONS)
def test_a_graph_without_entities_gives_empty_embeddings(composition):
    # corr failed in MKL's FFT ("Inconsistent configuration parameters") on the zero rows.
    layer = CompGCNConv(4, 3, num_relations=2, composition=composition).eval()
    x = torch.randn(0, 4, requires_grad=True)
    rel = torch.randn(4, 4, requires_grad=True)
    empty = torch.zeros(2, 0, dtype=torch.long)
    out, rel_out = layer(x, empty, torch.zeros(0, dtype=torch.long), rel)
    assert out.shape == (0, 3) and rel_out.shape == (4, 3)
    torch.testing.assert_close(rel_out, rel @ layer.w_rel)
    (out.sum() + rel_out.sum()).backward()
    assert x.grad.shape == (0, 4) and rel.grad is not None


def test_prebuilt_graphs_equal_edge_index_input():
    torch.manual_seed(0)
    layer = CompGCNConv(6, 6, num_relations=4, composition="mult").eval()
    x, rel = _inputs(layer)
    edge_index, edge_type = _kg()
    graphs = compgcn_graphs(edge_index, edge_type, 25, 4)
    assert isinstance(graphs, CompGCNGraphs)
    assert compgcn_graphs(edge_index, edge_type, 25, 4) is graphs  # cached per tensor
    for a, b in zip(layer(x, graphs, None, rel), layer(x, edge_index, edge_type, rel)):
        assert torch.equal(a, b)


def test_graphs_follow_the_reference_directions():
    # (head 0, r 1, tail 2): head 0 receives from tail 2 along r, tail 2 from head 0 along
    # the inverse r + R.
    graphs = compgcn_graphs(torch.tensor([[0], [2]]), torch.tensor([1]), 3, 2)
    assert graphs.incoming.edge_index().tolist() == [[2], [0]]
    assert graphs.incoming.edge_type.tolist() == [1]
    assert graphs.outgoing.edge_index().tolist() == [[0], [2]]
    assert graphs.outgoing.edge_type.tolist() == [3]


def test_cache_sees_in_place_edits():
    edge_index, edge_type = _kg()
    first = compgcn_graphs(edge_index, edge_type, 25, 4)
    edge_type[0] = (edge_type[0] + 1) % 3
    second = compgcn_graphs(edge_index, edge_type, 25, 4)
    assert second is not first
    assert not torch.equal(first.incoming.edge_type, second.incoming.edge_type)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda conv, x, r, ei, et: conv(x, ei, et, r[:3]), r"rel must have shape \[6, 6\]"),
        (lambda conv, x, r, ei, et: conv(x, ei, None, r), "edge_type is required"),
        (lambda conv, x, r, ei, et: conv(x, ei, et + 3, r), "num_relations = 3"),
        (lambda conv, x, r, ei, et: conv(x, ei, et[:-1], r), "edge_type must have shape"),
        (lambda conv, x, r, ei, et: conv(x[:, :4], ei, et, r), "in_channels"),
        (lambda conv, x, r, ei, et: conv(x, ei.tolist(), et, r), "edge_index tensor"),
    ],
)
def test_bad_input(call, message):
    layer = CompGCNConv(6, 6, num_relations=3)
    gen = torch.Generator().manual_seed(0)
    x, rel = torch.randn(5, 6, generator=gen), torch.randn(6, 6, generator=gen)
    edge_index, edge_type = torch.tensor([[0, 1], [2, 3]]), torch.tensor([0, 2])
    with pytest.raises(ValueError, match=message):
        call(layer, x, rel, edge_index, edge_type)


def test_bad_construction():
    with pytest.raises(ValueError, match="composition"):
        CompGCNConv(4, 4, 2, composition="add")
    with pytest.raises(ValueError, match="num_relations"):
        CompGCNConv(4, 4, -1)
