"""The five layers called exactly as PyG 2.8's: keywords, positional order, repr, flow, lazy
in_channels, cached, and clear refusals of PyG-internal machinery."""

from __future__ import annotations

import pytest
import torch
from _layer_cases import awkward_graphs, positive_weights
from _pyg_compat_cases import compare_layers

import galfast
from galfast import nn as gnn

pyg_nn = pytest.importorskip("torch_geometric.nn")

EDGE_INDEX, N = awkward_graphs()["loops_duplicates"]


def _x(n: int = N, channels: int = 8) -> torch.Tensor:
    return torch.randn(n, channels, generator=torch.Generator().manual_seed(1))


def _pair(name: str, *args, **kwargs):
    return getattr(pyg_nn, name)(*args, **kwargs), getattr(gnn, name)(*args, **kwargs)


LAYERS = {
    "GCNConv": ((8, 6), {}),
    "SAGEConv": ((8, 6), {}),
    "ChebConv": ((8, 6), {"K": 3}),
    "GATConv": ((8, 6), {"heads": 2}),
}


@pytest.mark.parametrize(
    "name, args, kwargs, expected",
    [
        ("GCNConv", (16, 32), {}, "GCNConv(16, 32)"),
        ("GCNConv", (-1, 32), {}, "GCNConv(-1, 32)"),
        ("SAGEConv", (8, 32), {"aggr": "sum"}, "SAGEConv(8, 32, aggr=sum)"),
        ("SAGEConv", ((8, 16), 32), {}, "SAGEConv((8, 16), 32, aggr=mean)"),
        ("ChebConv", (16, 32), {"K": 3}, "ChebConv(16, 32, K=3, normalization=sym)"),
        ("ChebConv", (16, 32), {"K": 2, "normalization": None}, None),
        ("GATConv", (8, 32), {"heads": 2}, "GATConv(8, 32, heads=2)"),
        ("GATConv", ((8, 16), 32), {"heads": 2}, "GATConv((8, 16), 32, heads=2)"),
    ],
)
def test_repr_is_pygs(name, args, kwargs, expected):
    pyg, ours = _pair(name, *args, **kwargs)
    assert repr(ours) == repr(pyg)
    if expected is not None:
        assert repr(ours) == expected


def test_gin_repr_is_pygs():
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU())
    assert repr(gnn.GINConv(mlp)) == repr(pyg_nn.GINConv(mlp))


@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
def test_nnconv_and_set2set_reprs_are_pygs(aggr):
    edge_net = torch.nn.Sequential(torch.nn.Linear(3, 32), torch.nn.ReLU())
    assert repr(gnn.NNConv(8, 4, edge_net, aggr=aggr)) == repr(
        pyg_nn.NNConv(8, 4, edge_net, aggr=aggr)
    )
    assert repr(gnn.Set2Set(8, 3)) == repr(pyg_nn.aggr.Set2Set(8, 3)) == "Set2Set(8, 16)"


@pytest.mark.parametrize("name", list(LAYERS))
def test_keyword_edge_index(name):
    args, kwargs = LAYERS[name]
    pyg, ours = _pair(name, *args, **kwargs)
    compare_layers(pyg, ours, {"x": _x()}, lambda layer, t: layer(x=t["x"], edge_index=EDGE_INDEX))


def test_cheb_fourth_positional_is_batch():
    # Two graphs in one batch, each with its own lambda_max: PyG's 4th positional is `batch`.
    edge_index = torch.tensor([[0, 1, 1, 2, 3, 4, 4, 5], [1, 0, 2, 1, 4, 3, 5, 4]])
    batch = torch.tensor([0, 0, 0, 1, 1, 1])
    weight = positive_weights(edge_index.size(1))
    lambda_max = torch.tensor([1.5, 3.0])
    pyg, ours = _pair("ChebConv", 8, 6, K=3)
    inputs = {"x": _x(6), "w": weight}
    compare_layers(
        pyg,
        ours,
        inputs,
        lambda layer, t: layer(t["x"], edge_index, t["w"], batch, lambda_max),
    )
    # A batch with a single lambda_max, and batch without lambda_max, also as PyG.
    for extra in ((batch,), (batch, torch.tensor(2.5))):
        compare_layers(
            pyg,
            ours,
            inputs,
            lambda layer, t, extra=extra: layer(t["x"], edge_index, t["w"], *extra),
        )


def test_cheb_batch_equals_separate_graphs():
    first = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    batch = torch.tensor([0, 0, 0, 1, 1])
    joined = torch.cat([first, torch.tensor([[3, 4], [4, 3]])], 1)
    conv = gnn.ChebConv(8, 6, K=3, normalization="rw")
    x = _x(5)
    out = conv(x, joined, None, batch, torch.tensor([2.0, 1.5]))
    torch.testing.assert_close(out[:3], conv(x[:3], first, None, None, 2.0))
    torch.testing.assert_close(
        out[3:], conv(x[3:], torch.tensor([[0, 1], [1, 0]]), None, None, 1.5)
    )
    with pytest.raises(ValueError, match="one value per graph"):
        conv(x, joined, None, batch, torch.tensor([2.0]).repeat(1, 2))


@pytest.mark.parametrize("name", ["GCNConv", "SAGEConv", "GATConv", "GINConv"])
def test_flow_target_to_source(name):
    make = lambda: (  # noqa: E731
        (pyg_nn.GINConv(torch.nn.Linear(8, 6)), gnn.GINConv(torch.nn.Linear(8, 6)))
        if name == "GINConv"
        else _pair(name, *LAYERS[name][0], **LAYERS[name][1])
    )
    pyg, ours = make()
    pyg.flow = ours.flow = "target_to_source"  # as an attribute, as PyG allows
    call = lambda layer, t: layer(t["x"], EDGE_INDEX)  # noqa: E731
    out = compare_layers(pyg, ours, {"x": _x()}, call)
    # The same as the flipped edge_index with the default flow.
    ours.flow = "source_to_target"
    torch.testing.assert_close(ours(_x(), EDGE_INDEX.flip(0)), out)
    if name != "GINConv":
        pyg, ours = _pair(name, *LAYERS[name][0], flow="target_to_source", **LAYERS[name][1])
        compare_layers(pyg, ours, {"x": _x()}, call)


def test_flow_refused_where_it_cannot_apply():
    conv = gnn.GCNConv(8, 6, flow="target_to_source")
    graph = galfast.Graph.from_edge_index(EDGE_INDEX, N)
    with pytest.raises(ValueError, match="target_to_source"):
        conv(_x(), graph)
    ones = torch.ones(EDGE_INDEX.size(1))
    adj_t = torch.sparse_coo_tensor(EDGE_INDEX.flip(0), ones, (N, N), check_invariants=True)
    with pytest.raises(ValueError, match="target_to_source"):
        conv(_x(), adj_t)
    with pytest.raises(ValueError, match="flow must be one of"):
        gnn.GATConv(8, 6, flow="sideways")
    # PyG's ChebConv builds its Laplacian from edge_index[0]'s degrees whatever the flow and
    # then aggregates the other way round: refused rather than approximated.
    with pytest.raises(ValueError, match="ChebConv.*target_to_source"):
        gnn.ChebConv(8, 6, K=2, flow="target_to_source")(_x(), EDGE_INDEX)
    conv.flow = "sideways"
    with pytest.raises(ValueError, match="flow must be one of"):
        conv(_x(), EDGE_INDEX)


@pytest.mark.parametrize("name", ["GCNConv", "SAGEConv", "ChebConv", "GATConv"])
def test_lazy_in_channels(name):
    args, kwargs = LAYERS[name]
    lazy = getattr(gnn, name)(-1, *args[1:], **kwargs)
    assert repr(lazy).startswith(f"{name}(-1, ")
    out = lazy(_x(), EDGE_INDEX)  # initialised on the first call
    eager = getattr(gnn, name)(*args, **kwargs)
    eager.load_state_dict(lazy.state_dict())
    torch.testing.assert_close(out, eager(_x(), EDGE_INDEX))
    # PyG's lazy layer loads galfast's state and computes the same.
    pyg = getattr(pyg_nn, name)(*args, **kwargs)
    pyg.load_state_dict(lazy.state_dict())
    torch.testing.assert_close(out, pyg(_x(), EDGE_INDEX), atol=1e-5, rtol=1e-4)


def test_lazy_bipartite_and_refusal():
    conv = gnn.SAGEConv((-1, -1), 6)
    out = conv((_x(5, 4), _x(3, 7)), torch.tensor([[0, 4], [2, 1]]))
    assert out.shape == (3, 6) and conv.lin_r.weight.shape == (6, 7)
    with pytest.raises(ValueError, match="does not support lazy"):
        gnn.SAGEConv(-1, 6, project=True)


def test_gcn_cached_reuses_the_first_graph_as_pyg():
    pyg, ours = _pair("GCNConv", 8, 6, cached=True)
    call = lambda layer, t: layer(t["x"], EDGE_INDEX)  # noqa: E731
    compare_layers(pyg, ours, {"x": _x()}, call)
    assert ours._cached_edge_index is not None
    other = torch.tensor([[0, 1], [1, 0]])
    # Both ignore the new graph once cached (PyG's documented transductive behaviour).
    torch.testing.assert_close(ours(_x(), other), pyg(_x(), other), atol=1e-5, rtol=1e-4)
    ours.reset_parameters()
    assert ours._cached_edge_index is None


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_gcn_cached_keeps_one_cache_for_edge_index_and_torch_sparse_as_pyg():
    """PyG caches every Tensor input (a torch.sparse adj_t is one) in _cached_edge_index, so a
    sparse adj_t after an edge_index reuses the first graph; galfast normalised the new one
    (1.7 off PyG on a 6-node graph)."""
    pyg, ours = _pair("GCNConv", 8, 6, cached=True)
    ours.load_state_dict(pyg.state_dict())
    first = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])
    torch.testing.assert_close(ours(_x(6), first), pyg(_x(6), first), atol=1e-5, rtol=1e-4)
    other = torch.tensor([[0, 0, 0, 1, 2], [5, 4, 3, 0, 0]])  # [dst, src]
    adj_t = torch.sparse_coo_tensor(other, torch.ones(5), (6, 6), check_invariants=True)
    adj_t = adj_t.to_sparse_csr()
    torch.testing.assert_close(ours(_x(6), adj_t), pyg(_x(6), adj_t), atol=1e-5, rtol=1e-4)
    assert ours._cached_edge_index is not None and ours._cached_adj_t is None


def test_message_passing_options():
    assert gnn.GCNConv(8, 6, aggr="add", node_dim=-2, decomposed_layers=1).flow == (
        "source_to_target"
    )
    with pytest.raises(ValueError, match="aggr='max' is not supported"):
        gnn.GCNConv(8, 6, aggr="max")
    with pytest.raises(ValueError, match="aggr_kwargs"):
        gnn.GINConv(torch.nn.Identity(), aggr_kwargs={"semi_grad": True})
    with pytest.raises(TypeError, match="unexpected keyword argument 'heads'"):
        gnn.GCNConv(8, 6, heads=2)


@pytest.mark.parametrize(
    "action, what",
    [
        (lambda c: c.register_message_forward_pre_hook(lambda *a: None), "register_message"),
        (lambda c: c.register_propagate_forward_hook(lambda *a: None), "register_propagate"),
        (lambda c: c.propagate(EDGE_INDEX, x=_x()), "propagate"),
        (lambda c: setattr(c, "decomposed_layers", 2), "decomposed_layers"),
        (lambda c: setattr(c, "explain", True), "explain"),
        (lambda c: torch.jit.script(c), "torch.jit.script"),
    ],
)
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_pyg_internals_are_refused_clearly(action, what):
    conv = gnn.GCNConv(8, 6)
    with pytest.raises(NotImplementedError, match=what):
        action(conv)
    conv.decomposed_layers = 1  # the one value that means "no decomposition" is fine
    conv.explain = False


@pytest.mark.parametrize(
    "make",
    [
        lambda: gnn.NNConv(4, 3, torch.nn.Linear(2, 12)),
        lambda: gnn.Set2Set(4, 2),
        lambda: gnn.CompGCNConv(4, 3, num_relations=2),
        lambda: torch.nn.Sequential(gnn.GATConv(4, 3)),  # inside a model too
    ],
    ids=["nnconv", "set2set", "compgcn", "nested"],
)
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_every_layer_refuses_torch_jit_script_by_name(make):
    """NNConv and Set2Set failed inside TorchScript (a TypeError about a None, a RuntimeError
    about a tuple)."""
    with pytest.raises(NotImplementedError, match="cannot be compiled by torch.jit.script"):
        torch.jit.script(make())


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_scripts_as_torch_batch_norm_on_the_same_tensors(training):
    """PyG's BatchNorm scripts; galfast's compiles as torch's BatchNorm1d on its own parameters
    and running buffers (it failed inside TorchScript)."""
    ours = gnn.BatchNorm(4)
    with torch.no_grad():
        ours.module.weight.uniform_(0.5, 1.5)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), ours).train(training)
    scripted = torch.jit.script(model)
    x = torch.randn(6, 3, generator=torch.Generator().manual_seed(0))
    expected = model(x)
    running = ours.module.running_mean.clone()
    torch.testing.assert_close(scripted(x), expected)
    moved = not torch.equal(ours.module.running_mean, running)
    assert moved == training  # the scripted layer updates this layer's own buffers


def test_static_feature_batches():
    x = torch.randn(3, N, 8, generator=torch.Generator().manual_seed(2))
    for make in (
        lambda lib: lib.GCNConv(8, 6),
        lambda lib: lib.GINConv(torch.nn.Linear(8, 6), train_eps=True),
    ):
        pyg, ours = make(pyg_nn), make(gnn)
        compare_layers(pyg, ours, {"x": x}, lambda layer, t: layer(t["x"], EDGE_INDEX))


def test_sparse_features_in_gcn():
    x = _x().to_sparse()
    pyg, ours = _pair("GCNConv", 8, 6)
    ours.load_state_dict(pyg.state_dict())
    torch.testing.assert_close(ours(x, EDGE_INDEX), pyg(x, EDGE_INDEX), atol=1e-5, rtol=1e-4)
