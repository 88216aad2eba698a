"""SAGEConv with PyG's other aggregations (``"lstm"``, ``"softmax"``, ``"std"``, Aggregation
modules, lists combined as MultiAggregation) against PyG 2.8: same state dict, outputs and
gradients of x and every parameter, on awkward graphs and every input form."""

from __future__ import annotations

import pytest
import torch
from _layer_cases import awkward_graphs, positive_weights
from _pyg_compat_cases import compare_layers

import galfast
from galfast import nn as gnn
from galfast.nn import _sage_aggregation

pyg_nn = pytest.importorskip("torch_geometric.nn")
pyg_aggr = pytest.importorskip("torch_geometric.nn.aggr")

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CS. tensor support is in beta")

GRAPHS = awkward_graphs()


def _sorted(edge_index):
    """Edges sorted by (target, source): an LSTM needs targets sorted, and this order is also
    a Graph's CSR order, so every input form gives the LSTM the same sequences."""
    key = edge_index[1] * (int(edge_index.max()) + 1 if edge_index.numel() else 1) + edge_index[0]
    return edge_index[:, torch.argsort(key, stable=True)]


def _x(n, channels=8, seed=1):
    return torch.randn(n, channels, generator=torch.Generator().manual_seed(seed))


# name -> (SAGEConv keyword arguments for the library given, order-sensitive)
AGGRS = {
    "lstm": (lambda lib: {"aggr": "lstm"}, True),
    "softmax_learn": (lambda lib: {"aggr": "softmax", "aggr_kwargs": {"learn": True}}, False),
    "std": (lambda lib: {"aggr": "std"}, False),
    "var_semi_grad": (lambda lib: {"aggr": pyg_aggr.VarAggregation(semi_grad=True)}, False),
    "powermean": (lambda lib: {"aggr": "powermean", "aggr_kwargs": {"learn": True}}, False),
    "mean_module": (lambda lib: {"aggr": pyg_aggr.MeanAggregation()}, False),
    "mlp": (
        lambda lib: {
            "aggr": pyg_aggr.MLPAggregation(8, 8, max_num_elements=4, num_layers=1),
        },
        True,
    ),
    "multi_cat": (lambda lib: {"aggr": ["mean", "max", "sum", "min", "std", "var"]}, False),
    "multi_softmax_cat": (
        lambda lib: {
            "aggr": ["mean", "max", "sum", "softmax"],
            "aggr_kwargs": {"aggrs_kwargs": [{}, {}, {}, {"learn": True, "t": 1}]},
        },
        False,
    ),
    "multi_proj": (
        lambda lib: {
            "aggr": ["mean", "max", "softmax"],
            "aggr_kwargs": {"mode": "proj", "mode_kwargs": {"in_channels": 8, "out_channels": 16}},
        },
        False,
    ),
    "multi_attn": (
        lambda lib: {
            "aggr": ["mean", "max", "lstm"],
            "aggr_kwargs": {
                "mode": "attn",
                "aggrs_kwargs": [{}, {}, {"in_channels": 8, "out_channels": 8}],
                "mode_kwargs": {"in_channels": 8, "out_channels": 16, "num_heads": 4},
            },
        },
        True,
    ),
    "multi_sum_mode": (
        lambda lib: {"aggr": ["mean", "max", "std"], "aggr_kwargs": {"mode": "sum"}},
        False,
    ),
    "multi_semi_grad": (
        lambda lib: {
            "aggr": ["mean", pyg_aggr.VarAggregation(semi_grad=True), "std"],
        },
        False,
    ),
}


def _pair(name, **extra):
    """PyG's layer and galfast's, built with the same arguments (fresh Aggregation objects)."""
    make, _ = AGGRS[name]
    return (lib.SAGEConv(8, 6, **make(lib), **extra) for lib in (pyg_nn, gnn))


@pytest.mark.parametrize("graph", list(GRAPHS))
@pytest.mark.parametrize("name", list(AGGRS))
def test_edge_index_matches_pyg(name, graph):
    edge_index, n = GRAPHS[graph]
    if graph == "hub" and name in ("lstm", "mlp", "multi_attn"):
        pytest.skip("a 1,100-step LSTM / dense MLP row: slow in PyG, nothing new covered")
    if AGGRS[name][1]:
        edge_index = _sorted(edge_index)
    pyg, ours = _pair(name)
    if graph == "no_edges" and "lstm" in str(ours.aggr):
        with pytest.raises(RuntimeError, match="sequence length"):
            pyg(_x(n), edge_index)  # PyG fails deep inside torch.nn.LSTM; galfast says why
        with pytest.raises(ValueError, match="LSTM aggregation needs at least one edge"):
            ours(_x(n), edge_index)
        return
    assert repr(ours) == repr(pyg)
    assert ours.state_dict().keys() == pyg.state_dict().keys()
    compare_layers(pyg, ours, {"x": _x(n)}, lambda c, t: c(t["x"], edge_index))


@pytest.mark.parametrize("name", list(AGGRS))
def test_graph_and_sparse_forms_match_pyg(name):
    edge_index, n = GRAPHS["loops_duplicates"]
    edge_index = _sorted(torch.unique(edge_index, dim=1))
    # Values other than 1: PyG's aggregation modules ignore them (only its fused string
    # reductions weight by them), and so must galfast.
    values = positive_weights(edge_index.size(1))
    coo = torch.sparse_coo_tensor(
        edge_index.flip(0), values, (n, n), check_invariants=True
    ).coalesce()
    pyg, ours = _pair(name)
    inputs = {"x": _x(n)}
    for ours_form in (coo, coo.to_sparse_csr(), galfast.Graph.from_edge_index(edge_index, n)):

        def call(conv, t, form=ours_form):
            return conv(t["x"], edge_index if conv is pyg else form)

        compare_layers(pyg, ours, inputs, call)
    compare_layers(pyg, ours, inputs, lambda c, t: c(t["x"], coo))


@pytest.mark.parametrize("name", ["lstm", "softmax_learn", "multi_cat", "multi_proj"])
@pytest.mark.parametrize("project", [False, True])
def test_bipartite_flow_and_options_match_pyg(name, project):
    gen = torch.Generator().manual_seed(4)
    src = torch.randint(0, 9, (30,), generator=gen)
    dst = torch.randint(0, 4, (30,), generator=gen)  # destination 4 and 5: no edges
    edge_index = _sorted(torch.stack([src, dst]))
    make, _ = AGGRS[name]
    pyg, ours = (
        lib.SAGEConv((8, 5), 6, project=project, normalize=True, **make(lib))
        for lib in (pyg_nn, gnn)
    )
    inputs = {"src": _x(9), "dst": _x(6, 5, seed=2)}
    compare_layers(pyg, ours, inputs, lambda c, t: c((t["src"], t["dst"]), edge_index))
    compare_layers(pyg, ours, inputs, lambda c, t: c((t["src"], None), edge_index, size=(9, 6)))
    flipped = {"flow": "target_to_source"}
    pyg, ours = (lib.SAGEConv(8, 6, **make(lib), **flipped) for lib in (pyg_nn, gnn))
    compare_layers(pyg, ours, {"x": _x(9)}, lambda c, t: c(t["x"], edge_index.flip(0)))


def test_lstm_needs_sorted_targets_as_in_pyg():
    conv = gnn.SAGEConv(8, 32, aggr="lstm")
    with pytest.raises(ValueError, match="'index' tensor is not sorted"):
        conv(_x(4), torch.tensor([[0, 1, 2, 3], [1, 0, 1, 0]]))


def test_lazy_multi_aggregation_matches_pyg():
    edge_index, n = GRAPHS["random"]
    pyg, ours = (lib.SAGEConv(-1, 6, aggr=["mean", "max", "softmax"]) for lib in (pyg_nn, gnn))
    x = _x(n)
    pyg(x, edge_index), ours(x, edge_index)  # materialise both
    assert ours.lin_l.in_features == 24
    compare_layers(pyg, ours, {"x": x}, lambda c, t: c(t["x"], edge_index))


def test_sparse_tensor_gets_pyg_row_pointer():
    from test_pyg_compat_sparse import FakeSparseTensor

    edge_index, n = GRAPHS["isolated"]
    edge_index = _sorted(torch.unique(edge_index, dim=1))
    ones = torch.ones(edge_index.size(1))
    coo = torch.sparse_coo_tensor(edge_index.flip(0), ones, (n, n), check_invariants=True)
    for name in ("lstm", "multi_softmax_cat"):
        conv = gnn.SAGEConv(8, 6, **AGGRS[name][0](gnn))
        torch.testing.assert_close(conv(_x(n), FakeSparseTensor(coo)), conv(_x(n), edge_index))


def test_plain_reductions_run_on_galfast_kernels(monkeypatch):
    """Inside a MultiAggregation, sum / mean / max / min / var / std never call PyG's
    aggregation code and build no per-edge messages; softmax does."""

    def no_messages():
        raise AssertionError("per-edge messages built for a fused reduction")

    edge_index, n = GRAPHS["random"]
    graph = galfast.Graph.from_edge_index(edge_index, n)
    module = pyg_aggr.MultiAggregation(["sum", "mean", "max", "min", "var", "std"])
    for part in module.aggrs:
        monkeypatch.setattr(part, "forward", lambda *a, **k: pytest.fail("PyG reduction ran"))
    out = _sage_aggregation.run_aggregation(module, graph, _x(n), no_messages, n)
    assert out.shape == (n, 48)


def test_refusals_are_clear():
    with pytest.raises(ValueError, match="Could not resolve"):
        gnn.SAGEConv(4, 4, aggr="nope")
    with pytest.raises(ValueError, match="torch_geometric Aggregation"):
        gnn.SAGEConv(4, 4, aggr=torch.nn.Linear(2, 2))


# torch's compiler stack imports torch.jit helpers that warn on import.
@pytest.mark.filterwarnings("ignore::DeprecationWarning:torch.*")
def test_torch_compile_traces_without_graph_breaks():
    import torch._dynamo as dynamo

    edge_index, n = GRAPHS["loops_duplicates"]
    conv = gnn.SAGEConv(8, 6, aggr=["mean", "sum", "min", "max", "std"])
    assert dynamo.explain(conv)(_x(n), edge_index).graph_break_count == 0
    compiled = torch.compile(conv)
    torch.testing.assert_close(compiled(_x(n), edge_index), conv(_x(n), edge_index))
