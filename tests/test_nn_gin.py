"""galfast.nn.GINConv against torch_geometric's GINConv (same weights, same inputs)."""

from __future__ import annotations

import pytest
import torch
from _layer_cases import assert_same_layer, awkward_graphs, graph_ids

from galfast.nn import GINConv

pyg_nn = pytest.importorskip("torch_geometric.nn")

GRAPHS = awkward_graphs()


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 6))


@pytest.mark.parametrize("name", graph_ids())
@pytest.mark.parametrize("eps,train_eps", [(0.0, False), (0.4, False), (-0.3, True)])
def test_matches_pyg(name, eps, train_eps):
    edge_index, n = GRAPHS[name]
    x = torch.randn(n, 8, generator=torch.Generator().manual_seed(1))
    pyg = pyg_nn.GINConv(_mlp(), eps=eps, train_eps=train_eps)
    ours = GINConv(_mlp(), eps=eps, train_eps=train_eps)
    assert_same_layer(pyg, ours, x, (x, edge_index), (x, edge_index))


def test_eps_is_a_parameter_only_when_trained():
    assert "eps" in dict(GINConv(_mlp(), train_eps=True).named_parameters())
    fixed = GINConv(_mlp(), eps=0.5)
    assert "eps" not in dict(fixed.named_parameters())
    assert "eps" in dict(fixed.named_buffers())
    fixed.eps.data.fill_(3.0)
    fixed.reset_parameters()
    assert fixed.eps.item() == 0.5
