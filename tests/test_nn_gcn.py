"""galfast.nn.GCNConv against torch_geometric's GCNConv (same weights, same inputs)."""

from __future__ import annotations

import pytest
import torch
from _layer_cases import (
    assert_same_layer,
    awkward_graphs,
    graph_ids,
    overwritten_self_loops,
    positive_weights,
)

import galfast
from galfast.nn import GCNConv

pyg_nn = pytest.importorskip("torch_geometric.nn")

GRAPHS = awkward_graphs()


def _x(num_nodes: int, channels: int = 8, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(num_nodes, channels, generator=torch.Generator().manual_seed(1), dtype=dtype)


@pytest.mark.parametrize("name", graph_ids())
@pytest.mark.parametrize("out_channels", [5, 12])
def test_matches_pyg_unweighted(name, out_channels):
    edge_index, n = GRAPHS[name]
    x = _x(n)
    pyg = pyg_nn.GCNConv(8, out_channels)
    assert_same_layer(pyg, GCNConv(8, out_channels), x, (x, edge_index), (x, edge_index))


@pytest.mark.parametrize("name", graph_ids())
@pytest.mark.parametrize("improved", [False, True])
@pytest.mark.parametrize("add_self_loops", [False, True])
def test_matches_pyg_weighted(name, improved, add_self_loops):
    edge_index, n = GRAPHS[name]
    x, w = _x(n), positive_weights(edge_index.size(1))
    kwargs = dict(improved=improved, add_self_loops=add_self_loops)
    pyg = pyg_nn.GCNConv(8, 6, **kwargs)
    unused = overwritten_self_loops(edge_index) if add_self_loops else None
    ours = GCNConv(8, 6, **kwargs)
    assert_same_layer(
        pyg, ours, x, (x, edge_index, w), (x, edge_index, w), w, unused_weights=unused
    )


@pytest.mark.parametrize("name", graph_ids())
def test_improved_unweighted_matches_pyg(name):
    # PyG 2.8's edge_index path drops `improved` without weights (A + I); galfast follows it so
    # that swapping the import changes no number. With weights both use A + 2I (tested above).
    edge_index, n = GRAPHS[name]
    x = _x(n)
    pyg = pyg_nn.GCNConv(8, 6, improved=True)
    assert_same_layer(pyg, GCNConv(8, 6, improved=True), x, (x, edge_index), (x, edge_index))
    plain = GCNConv(8, 6)
    plain.load_state_dict(pyg.state_dict())
    torch.testing.assert_close(plain(x, edge_index), pyg(x, edge_index))


@pytest.mark.parametrize("name", graph_ids())
def test_matches_pyg_without_normalisation(name):
    edge_index, n = GRAPHS[name]
    x, w = _x(n), positive_weights(edge_index.size(1))
    pyg = pyg_nn.GCNConv(8, 6, normalize=False, bias=False)
    ours = GCNConv(8, 6, normalize=False, bias=False)
    assert_same_layer(pyg, ours, x, (x, edge_index, w), (x, edge_index, w), w)


def test_matches_pyg_in_float64():
    edge_index, n = GRAPHS["loops_duplicates"]
    x = _x(n, dtype=torch.float64)
    pyg = pyg_nn.GCNConv(8, 6).double()
    ours = GCNConv(8, 6).double()
    assert_same_layer(pyg, ours, x, (x, edge_index), (x, edge_index), atol=1e-12, rtol=1e-10)


def test_graph_input_equals_edge_index_input():
    edge_index, n = GRAPHS["random"]
    # A coalesced Graph carrying the weights (parallel edges summed) is the same operator, as
    # long as no node has two self loops (GCN keeps one loop's weight, a Graph sums them).
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    x, w = _x(n), positive_weights(edge_index.size(1))
    conv = GCNConv(8, 6)
    graph = galfast.Graph.from_edge_index(edge_index, n, w)
    torch.testing.assert_close(conv(x, graph), conv(x, edge_index, w))
    # Repeated calls (cached CSR and normalisation) give identical results.
    torch.testing.assert_close(conv(x, edge_index), conv(x, edge_index), atol=0, rtol=0)


def test_normalisation_is_cached_on_the_graph():
    edge_index, n = GRAPHS["random"]
    graph = galfast.Graph.from_edge_index(edge_index, n, positive_weights(edge_index.size(1)))
    conv = GCNConv(8, 6)
    conv(_x(n), graph)
    cached = dict(graph._cache)
    conv(_x(n), graph)
    assert any(isinstance(k, tuple) and k[:2] == ("nn", "gcn_norm") for k in cached)
    assert all(graph._cache[k] is v for k, v in cached.items())
    assert not any(isinstance(v, torch.Tensor) for v in vars(conv).values())


def test_bad_arguments():
    with pytest.raises(ValueError, match="does not support adding self-loops"):
        GCNConv(4, 4, normalize=False, add_self_loops=True)
    edge_index, n = GRAPHS["random"]
    conv = GCNConv(8, 6)
    with pytest.raises(ValueError, match="edge_weight must have shape"):
        conv(_x(n), edge_index, torch.ones(3))
    with pytest.raises(ValueError, match="nodes"):
        conv(_x(n + 1), galfast.Graph.from_edge_index(edge_index, n))
    with pytest.raises(ValueError, match="num_nodes"):
        conv(_x(5), edge_index)
    with pytest.raises(ValueError, match="edge_index tensor"):
        conv(_x(n), [[0, 1], [1, 0]])


def test_negative_degree_names_the_cause():
    # Was "edge_weight contains NaN or infinite values" about the user's finite weights (PyG's
    # output has NaN rows there); without normalisation the same weights still match PyG.
    edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    x, w = _x(4), torch.tensor([1.0, -5.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="node 2 has a negative weighted in-degree"):
        GCNConv(8, 6)(x, edge_index, w)
    with pytest.raises(ValueError, match="node 2 has a negative weighted in-degree"):
        GCNConv(8, 6)(x, galfast.Graph.from_edge_index(edge_index, 4, w))
    args = (x, edge_index, w)
    pyg = pyg_nn.GCNConv(8, 6, normalize=False)
    assert_same_layer(pyg, GCNConv(8, 6, normalize=False), x, args, args, w)
