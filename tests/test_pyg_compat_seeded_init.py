"""The same seed builds the same weights as PyG's layer and leaves the generator where PyG's
does, so a script's later draws (dropout, sampling, the next layer) match after the swap."""

from __future__ import annotations

import pytest
import torch

from galfast import nn as gnn

pyg_nn = pytest.importorskip("torch_geometric.nn")

LAYERS = {
    "GCNConv": lambda m: m.GCNConv(8, 4),
    "ChebConv": lambda m: m.ChebConv(8, 4, K=3),
    "GATConv": lambda m: m.GATConv((8, 6), 4, heads=2, edge_dim=3, residual=True),
    "GINConv": lambda m: m.GINConv(torch.nn.Linear(8, 4), train_eps=True),
    "SAGEConv": lambda m: m.SAGEConv(8, 4),
    "SAGEConv-bipartite": lambda m: m.SAGEConv((8, 6), 4),
    "SAGEConv-project": lambda m: m.SAGEConv(8, 4, project=True),
    "SAGEConv-lstm": lambda m: m.SAGEConv(8, 4, aggr="lstm"),
    "NNConv": lambda m: m.NNConv(8, 4, torch.nn.Linear(3, 32)),
    "Set2Set": lambda m: m.Set2Set(8, processing_steps=2),
}


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_same_seed_builds_pyg_weights(layer):
    built = []
    for module in (pyg_nn, gnn):
        torch.manual_seed(0)
        built.append((LAYERS[layer](module).state_dict(), torch.rand(3)))
    (theirs, next_theirs), (ours, next_ours) = built
    assert ours.keys() == theirs.keys()
    for key in theirs:
        assert torch.equal(ours[key], theirs[key]), key
    assert torch.equal(next_ours, next_theirs)
