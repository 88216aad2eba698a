"""galfast.nn.norm (normalisations as pure, cached functions) and the edge_index input cache."""

from __future__ import annotations

import gc

import pytest
import torch
from _layer_cases import awkward_graphs, graph_ids, positive_weights

import galfast
from galfast.nn import _graph_input
from galfast.nn._graph_input import graph_input
from galfast.nn.norm import cheb_norm, gcn_norm, self_loops_removed, self_loops_replaced

GRAPHS = awkward_graphs()


def _dense(graph: galfast.Graph, weight=None) -> torch.Tensor:
    """A[i, j] = summed weight of the edges j -> i."""
    n = graph.num_nodes
    w = torch.ones(graph.num_edges, dtype=torch.float64) if weight is None else weight.double()
    return (
        torch.zeros(n * n, dtype=torch.float64)
        .index_add(0, graph.row * n + graph.col, w)
        .view(n, n)
    )


def _graph(name: str):
    edge_index, n = GRAPHS[name]
    return graph_input(edge_index, n)[0]


@pytest.mark.parametrize("name", graph_ids())
def test_self_loops_replaced_keeps_one_loop_per_node(name):
    graph = _graph(name)
    looped, source = self_loops_replaced(graph)
    is_loop = looped.row == looped.col
    assert torch.equal(looped.row[is_loop], torch.arange(graph.num_nodes))
    plain = graph.row != graph.col
    assert torch.equal(
        _dense(looped) - torch.eye(graph.num_nodes),
        _dense(graph) * (1 - torch.eye(graph.num_nodes)),
    )
    # Kept edges point back at themselves; a node's loop at its last existing loop, else -1.
    kept = source[~is_loop]
    assert torch.equal(graph.row[kept], looped.row[~is_loop]) and torch.equal(
        graph.col[kept], looped.col[~is_loop]
    )
    for node, origin in zip(looped.row[is_loop].tolist(), source[is_loop].tolist()):
        loops = ((graph.row == node) & (graph.col == node)).nonzero().flatten()
        assert origin == (int(loops.max()) if loops.numel() else -1)
    assert int(plain.sum()) == int((~is_loop).sum())


@pytest.mark.parametrize("name", graph_ids())
def test_self_loops_removed(name):
    graph = _graph(name)
    plain, source = self_loops_removed(graph)
    assert not (plain.row == plain.col).any()
    assert torch.equal(_dense(plain), _dense(graph) * (1 - torch.eye(graph.num_nodes)))
    assert torch.equal(graph.col[source], plain.col)


@pytest.mark.parametrize("name", graph_ids())
@pytest.mark.parametrize("improved", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_gcn_norm_is_the_dense_formula(name, improved, weighted):
    graph = _graph(name)
    n = graph.num_nodes
    weight = positive_weights(graph.num_edges).double() if weighted else None
    target, normalised = gcn_norm(graph, weight, improved=improved, dtype=torch.float64)
    if normalised is None:
        scale = target.degree_scale("gcn", torch.float64)
        normalised = scale[target.row] * scale[target.col]
    # A + fI with existing loops replaced: the last loop's weight survives.
    adjacency = _dense(graph, weight) * (1 - torch.eye(n, dtype=torch.float64))
    diagonal = torch.full((n,), 2.0 if improved else 1.0, dtype=torch.float64)
    w = torch.ones(graph.num_edges, dtype=torch.float64) if weight is None else weight
    for e in (graph.row == graph.col).nonzero().flatten().tolist():
        diagonal[graph.row[e]] = w[e]
    adjacency += torch.diag(diagonal)
    d = adjacency.sum(1).pow(-0.5)
    expected = d[:, None] * adjacency * d[None, :]
    torch.testing.assert_close(_dense(target, normalised), expected)


@pytest.mark.parametrize("name", graph_ids())
@pytest.mark.parametrize("normalization", [None, "sym", "rw"])
def test_cheb_norm_is_the_dense_scaled_laplacian(name, normalization):
    graph = _graph(name)
    n = graph.num_nodes
    weight = positive_weights(graph.num_edges).double()
    target, off, diag = cheb_norm(
        graph, weight, normalization=normalization, lambda_max=1.7, dtype=torch.float64
    )
    scaled = _dense(target, off) + torch.diag(diag)
    adjacency = _dense(graph, weight) * (1 - torch.eye(n, dtype=torch.float64))  # [i, j]: j -> i
    out_degree = adjacency.sum(0)
    if normalization is None:
        laplacian = torch.diag(out_degree) - adjacency
    elif normalization == "sym":
        d = out_degree.pow(-0.5).masked_fill(out_degree == 0, 0)
        laplacian = torch.eye(n, dtype=torch.float64) - d[:, None] * adjacency * d[None, :]
    else:
        d = out_degree.reciprocal().masked_fill(out_degree == 0, 0)
        laplacian = torch.eye(n, dtype=torch.float64) - adjacency * d[None, :]
    torch.testing.assert_close(scaled, 2 * laplacian / 1.7 - torch.eye(n, dtype=torch.float64))


def test_normalisations_are_cached_on_the_graph_unless_weights_are_learnable():
    graph = _graph("random")
    assert self_loops_replaced(graph)[0] is self_loops_replaced(graph)[0]
    first = gcn_norm(graph, improved=True)[1]
    assert gcn_norm(graph, improved=True)[1] is first
    assert cheb_norm(graph)[1] is cheb_norm(graph)[1]
    weight = positive_weights(graph.num_edges).requires_grad_(True)
    normalised = gcn_norm(graph, weight)[1]
    assert gcn_norm(graph, weight)[1] is not normalised
    normalised.sum().backward()
    assert weight.grad is not None and weight.grad.abs().sum() > 0


def test_stored_graph_weights_are_cached():
    edge_index, n = GRAPHS["random"]
    graph = galfast.Graph.from_edge_index(edge_index, n, positive_weights(edge_index.size(1)))
    assert gcn_norm(graph, graph.edge_weight)[1] is gcn_norm(graph, graph.edge_weight)[1]


def test_edge_index_graph_is_cached_per_tensor_and_version():
    edge_index = GRAPHS["random"][0].clone()
    graph = graph_input(edge_index, 20)[0]
    assert graph_input(edge_index, 20)[0] is graph
    assert graph_input(edge_index.clone(), 20)[0] is not graph
    assert graph_input(edge_index, 21)[0].num_nodes == 21
    edge_index[0, 0] = (edge_index[0, 0] + 1) % 20  # in place: a new version, a new Graph
    rebuilt = graph_input(edge_index, 20)[0]
    assert rebuilt is not graph and torch.equal(
        rebuilt.edge_index(), graph_input(edge_index.clone(), 20)[0].edge_index()
    )
    before = len(_graph_input._GRAPHS)
    del edge_index
    gc.collect()
    assert len(_graph_input._GRAPHS) < before


def test_edge_weight_follows_edge_index_columns():
    edge_index = torch.tensor([[2, 0, 1, 0], [0, 1, 2, 1]])
    weight = torch.tensor([1.0, 2.0, 3.0, 4.0])
    graph, reordered = graph_input(edge_index, 3, weight)
    # CSR order sorts by target, then source; the two parallel 0 -> 1 edges keep input order.
    assert torch.equal(graph.edge_index(), torch.tensor([[2, 0, 0, 1], [0, 1, 1, 2]]))
    assert torch.equal(reordered, torch.tensor([1.0, 2.0, 4.0, 3.0]))
