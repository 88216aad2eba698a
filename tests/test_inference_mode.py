"""Layers, models and ops under torch.inference_mode, as PyG's run there: the first call on a
new graph failed ("Inference tensors do not track version counter"), and a graph first seen
inside inference mode cached inference tensors that a later training step could not save for
its backward ("Inference tensors cannot be saved for backward")."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import galfast.nn as gnn
from galfast import Graph
from galfast.models import CompGCNEncoder, EmbeddingEncoder

EDGES = torch.tensor([[0, 1, 2, 3, 3], [1, 2, 3, 0, 1]])
NUM_NODES = 4

LAYERS = {
    "gcn": lambda: gnn.GCNConv(6, 5),
    "sage": lambda: gnn.SAGEConv(6, 5),
    "sage-max": lambda: gnn.SAGEConv(6, 5, aggr="max"),
    "gat": lambda: gnn.GATConv(6, 5, heads=2),
    "cheb": lambda: gnn.ChebConv(6, 5, K=2),
    "gin": lambda: gnn.GINConv(nn.Linear(6, 5)),
}


def _features() -> torch.Tensor:
    return torch.randn(NUM_NODES, 6, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("name", list(LAYERS))
@pytest.mark.parametrize("graph_form", ["edge_index", "graph"])
def test_a_layer_infers_then_trains_on_the_same_graph(name, graph_form):
    torch.manual_seed(0)
    conv = LAYERS[name]()
    graph = EDGES.clone() if graph_form == "edge_index" else Graph.from_edge_index(EDGES, 4)
    x = _features()
    with torch.inference_mode():  # first: the graph's caches are filled in inference mode
        inferred = conv(x, graph)
    with torch.no_grad():
        torch.testing.assert_close(inferred, conv(x, graph))
    x.requires_grad_()
    conv(x, graph).square().sum().backward()  # the caches hold no inference tensor
    assert x.grad is not None and bool(torch.isfinite(x.grad).all())


def test_a_graph_built_in_inference_mode_trains_outside_it():
    conv = gnn.GCNConv(6, 5)
    with torch.inference_mode():
        graph = Graph.from_edge_index(EDGES, NUM_NODES)
        edge_index = EDGES.clone()  # an inference tensor
        inferred = conv(_features(), edge_index)
    x = _features().requires_grad_()
    conv(x, graph).sum().backward()
    torch.testing.assert_close(conv(_features(), graph).detach(), inferred)
    assert x.grad is not None


def test_models_run_in_inference_mode():
    torch.manual_seed(0)
    graph = Graph.from_edge_index(EDGES, NUM_NODES, symmetrize=True)
    encoder = EmbeddingEncoder(NUM_NODES, 6, [gnn.GCNConv(6, 3)]).eval()
    with torch.inference_mode():
        ids = torch.arange(NUM_NODES)
        inferred = encoder(ids, graph)
    with torch.no_grad():
        torch.testing.assert_close(inferred, encoder(torch.arange(NUM_NODES), graph))
    triples = torch.tensor([[0, 0, 1], [1, 1, 2], [2, 0, 3]])
    kg = CompGCNEncoder(NUM_NODES, 2, triples, dim=4, init_dim=4).eval()
    with torch.inference_mode():
        entities, relations = kg.embed()
    assert entities.shape == (NUM_NODES, 4) and bool(torch.isfinite(entities).all())
