"""galfast.nn.SAGEConv against torch_geometric's SAGEConv (same weights, same inputs)."""

from __future__ import annotations

import pytest
import torch
from _layer_cases import assert_same_layer, awkward_graphs, graph_ids

import galfast
from galfast.nn import SAGEConv

pyg_nn = pytest.importorskip("torch_geometric.nn")

GRAPHS = awkward_graphs()


def _x(num_nodes: int) -> torch.Tensor:
    return torch.randn(num_nodes, 8, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("name", graph_ids())
@pytest.mark.parametrize("aggr", ["mean", "sum", "max"])
@pytest.mark.parametrize("out_channels", [5, 12])
def test_matches_pyg(name, aggr, out_channels):
    edge_index, n = GRAPHS[name]
    x = _x(n)
    pyg = pyg_nn.SAGEConv(8, out_channels, aggr=aggr)
    ours = SAGEConv(8, out_channels, aggr=aggr)
    assert_same_layer(pyg, ours, x, (x, edge_index), (x, edge_index))


@pytest.mark.parametrize("name", graph_ids())
@pytest.mark.parametrize(
    "kwargs",
    [
        dict(normalize=True),
        dict(root_weight=False, bias=False),
        dict(project=True, aggr="max"),
        dict(project=True, normalize=True, aggr="sum"),
    ],
    ids=["normalize", "no_root_no_bias", "project_max", "project_normalize_sum"],
)
def test_matches_pyg_options(name, kwargs):
    edge_index, n = GRAPHS[name]
    x = _x(n)
    pyg = pyg_nn.SAGEConv(8, 6, **kwargs)
    assert_same_layer(pyg, SAGEConv(8, 6, **kwargs), x, (x, edge_index), (x, edge_index))


def test_ignores_stored_edge_weights_like_pyg():
    edge_index, n = GRAPHS["random"]
    weights = torch.rand(edge_index.size(1)) + 0.5
    conv = SAGEConv(8, 6, aggr="sum")
    weighted = galfast.Graph.from_edge_index(edge_index, n, weights)
    plain = galfast.Graph.from_edge_index(edge_index, n)
    torch.testing.assert_close(conv(_x(n), weighted), conv(_x(n), plain), atol=0, rtol=0)


def test_add_is_an_alias_of_sum():
    edge_index, n = GRAPHS["random"]
    add, total = SAGEConv(8, 6, aggr="add"), SAGEConv(8, 6, aggr="sum")
    total.load_state_dict(add.state_dict())
    torch.testing.assert_close(add(_x(n), edge_index), total(_x(n), edge_index), atol=0, rtol=0)


def test_bad_aggr():
    pytest.importorskip("torch_geometric")
    with pytest.raises(ValueError, match="Could not resolve 'nope'"):
        SAGEConv(4, 4, aggr="nope")
