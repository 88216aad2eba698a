"""galfast.nn.GATConv against torch_geometric's GATConv (same weights, same inputs)."""

from __future__ import annotations

import pytest
import torch
from _layer_cases import assert_same_layer, awkward_graphs, graph_ids
from _pyg_compat_cases import compare_layers

import galfast
from galfast.nn import GATConv

pyg_nn = pytest.importorskip("torch_geometric.nn")

GRAPHS = awkward_graphs()


def _x(num_nodes: int) -> torch.Tensor:
    return torch.randn(num_nodes, 8, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("name", graph_ids())
@pytest.mark.parametrize("heads,concat", [(1, True), (3, True), (3, False)])
@pytest.mark.parametrize("add_self_loops", [True, False])
def test_matches_pyg(name, heads, concat, add_self_loops):
    edge_index, n = GRAPHS[name]
    x = _x(n)
    kwargs = dict(heads=heads, concat=concat, add_self_loops=add_self_loops)
    pyg = pyg_nn.GATConv(8, 5, **kwargs)
    assert_same_layer(pyg, GATConv(8, 5, **kwargs), x, (x, edge_index), (x, edge_index))


@pytest.mark.parametrize("name", graph_ids())
def test_matches_pyg_options(name):
    edge_index, n = GRAPHS[name]
    x = _x(n)
    kwargs = dict(heads=2, negative_slope=0.05, residual=True, bias=False, dropout=0.5)
    # Attention dropout is only active in training: in eval mode both are deterministic.
    pyg, ours = pyg_nn.GATConv(8, 4, **kwargs).eval(), GATConv(8, 4, **kwargs).eval()
    assert_same_layer(pyg, ours, x, (x, edge_index), (x, edge_index))


def test_state_dict_keys_match_pyg():
    for kwargs in (dict(), dict(heads=4, residual=True), dict(bias=False, concat=False)):
        pyg_keys = pyg_nn.GATConv(8, 5, **kwargs).state_dict().keys()
        assert GATConv(8, 5, **kwargs).state_dict().keys() == pyg_keys


def test_graph_input_equals_edge_index_input():
    edge_index, n = GRAPHS["loops_duplicates"]
    # Without parallel edges, a Graph is the same graph as its edge_index.
    graph = galfast.Graph.from_edge_index(edge_index, n)
    simple = graph.edge_index()
    conv = GATConv(8, 5, heads=2)
    torch.testing.assert_close(conv(_x(n), graph), conv(_x(n), simple))


def test_dropout_in_training_is_seeded_by_torch():
    edge_index, n = GRAPHS["random"]
    conv = GATConv(8, 5, heads=2, dropout=0.5)
    torch.manual_seed(0)
    first = conv(_x(n), edge_index)
    torch.manual_seed(0)
    again = conv(_x(n), edge_index)
    different = conv(_x(n), edge_index)
    torch.testing.assert_close(first, again, atol=0, rtol=0)
    assert not torch.allclose(first, different)
    conv.eval()
    torch.testing.assert_close(conv(_x(n), edge_index), conv(_x(n), edge_index), atol=0, rtol=0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="edge_dim"):
        GATConv(8, 4, edge_dim=0)
    with pytest.raises(ValueError, match="fill_value"):
        GATConv(8, 4, edge_dim=2, fill_value="median")
    with pytest.raises(ValueError, match="in_channels"):
        GATConv((8, 6, 2), 4)
    with pytest.raises(ValueError, match="heads"):
        GATConv(8, 4, heads=0)
    with pytest.raises(ValueError, match="dropout"):
        GATConv(8, 4, dropout=1.5)
    edge_index, n = GRAPHS["random"]
    conv = GATConv(8, 4)
    with pytest.raises(ValueError, match="edge_attr"):
        GATConv(8, 4, edge_dim=3)(_x(n), edge_index, torch.ones(edge_index.size(1) + 1, 3))
    with pytest.raises(ValueError, match="x must be"):
        conv(_x(n)[None], edge_index)


def test_lazy_edge_dim_refuses_a_fill_vector_of_another_width_at_forward():
    """edge_dim=-1 learns the edge features' width at the first forward: a fill vector of
    another width is refused there by name, not by a broadcast error from torch."""
    edge_index, n = GRAPHS["random"]
    conv = GATConv(8, 4, heads=2, edge_dim=-1, fill_value=torch.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"fill_value must hold 1 or edge_dim = 2 values"):
        conv(_x(n), edge_index, torch.ones(edge_index.size(1), 2))
    fitting = GATConv(8, 4, heads=2, edge_dim=-1, fill_value=torch.tensor([1.0, 2.0]))
    assert fitting(_x(n), edge_index, torch.ones(edge_index.size(1), 2)).shape == (n, 8)


@pytest.mark.parametrize("flow", ["source_to_target", "target_to_source"])
@pytest.mark.parametrize("fill_value", ["mul", "max", "min", "add", "mean"])
def test_loop_edge_features_of_nodes_without_edges_match_pyg(fill_value, flow):
    """A loop's edge features reduce the node's edges by edge_index[1] whatever the flow, so
    with target_to_source node 0 (no such edge, but messages of its own) attends over a loop
    whose features are PyG's empty reduction: 1 for "mul" (an empty product), else 0."""
    edge_index = torch.tensor([[0, 0, 1], [1, 2, 2]])
    gen = torch.Generator().manual_seed(0)
    inputs = {"x": torch.randn(4, 3, generator=gen), "edge_attr": torch.rand(3, 2) + 1.0}
    kwargs = dict(heads=2, edge_dim=2, fill_value=fill_value, flow=flow)
    torch.manual_seed(0)
    pyg, ours = pyg_nn.GATConv(3, 2, **kwargs), GATConv(3, 2, **kwargs)
    compare_layers(pyg, ours, inputs, lambda c, t: c(t["x"], edge_index, t["edge_attr"]))


@pytest.mark.parametrize("edge_dim", [None, 3])
def test_cpu_autocast_runs_in_the_logits_dtype_as_pyg(edge_dim):
    """Under autocast the projection is bfloat16 and the attention logits float32: the
    aggregation takes the logits' dtype, as PyG's messages promote (it refused the mix with
    "alpha_src has dtype torch.float32 but h has torch.bfloat16")."""
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    edge_index, n = GRAPHS["random"]
    ours, pyg = (
        GATConv(8, 4, heads=2, edge_dim=edge_dim),
        pyg_nn.GATConv(8, 4, 2, edge_dim=edge_dim),
    )
    ours.load_state_dict(pyg.state_dict())
    args = (_x(n), edge_index)
    if edge_dim is not None:
        args += (
            torch.randn(edge_index.size(1), edge_dim, generator=torch.Generator().manual_seed(4)),
        )
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, expected = ours(*args), pyg(*args)
    assert out.dtype == expected.dtype == torch.float32
    # bfloat16 keeps 8 bits: the two round the projections' products differently
    torch.testing.assert_close(out, expected, atol=2e-2, rtol=2e-2)
