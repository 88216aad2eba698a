"""Every layer refuses a Graph edited in place after it was built, as the ops do: layers that
aggregate over graphs derived from it (with self loops, normalised) never reach the op's own
check."""

from __future__ import annotations

import pytest
import torch

from galfast import Graph
from galfast import nn as gnn

# name -> (layer, whether its forward takes edge_attr)
LAYERS = {
    "gcn": (lambda: gnn.GCNConv(4, 2), False),
    "gcn_unnormalized": (lambda: gnn.GCNConv(4, 2, normalize=False), False),
    "gat": (lambda: gnn.GATConv(4, 2, heads=2), False),
    "gat_no_loops": (lambda: gnn.GATConv(4, 2, add_self_loops=False), False),
    "sage": (lambda: gnn.SAGEConv(4, 2), False),
    "gin": (lambda: gnn.GINConv(torch.nn.Linear(4, 2)), False),
    "cheb": (lambda: gnn.ChebConv(4, 2, K=2), False),
    "nnconv": (lambda: gnn.NNConv(4, 2, torch.nn.Linear(3, 8)), True),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_a_layer_refuses_a_graph_edited_in_place(name):
    make, takes_edge_attr = LAYERS[name]
    layer = make()
    g = Graph.from_edge_index(torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), 3)
    x = torch.randn(3, 4)
    args = (x, g, torch.randn(4, 3)) if takes_edge_attr else (x, g)
    layer(*args)  # derived graphs cached on g
    g.col.fill_(0)
    with pytest.raises(ValueError, match="Graph.col was modified in place"):
        layer(*args)
