"""The same seed builds the same weights as PyG's layer and leaves the generator where PyG's
does, so a script's later draws (dropout, sampling, the next layer) match after the swap."""

from __future__ import annotations

import pytest
import torch
from torch.nn.parameter import is_lazy

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


# Lazy layers (in_channels=-1) draw on their first call: each linear map its own weight (and
# bias) with the layer's initializer, in the order PyG's forward first calls them.
_GEN = torch.Generator().manual_seed(0)
X, X_DST = torch.randn(5, 8, generator=_GEN), torch.randn(3, 6, generator=_GEN)
EDGE_ATTR = torch.randn(6, 2, generator=_GEN)
EDGES = torch.tensor([[0, 1, 2, 3, 4, 4], [1, 2, 3, 4, 0, 2]])
BIPARTITE = torch.tensor([[0, 1, 2, 3, 4, 4], [1, 2, 0, 1, 0, 2]])
LAZY = {
    "GCNConv": (lambda m: m.GCNConv(-1, 4), lambda c: c(X, EDGES)),
    "ChebConv": (lambda m: m.ChebConv(-1, 4, K=2), lambda c: c(X, EDGES)),
    "SAGEConv": (lambda m: m.SAGEConv(-1, 4), lambda c: c(X, EDGES)),
    "SAGEConv-bipartite": (lambda m: m.SAGEConv((-1, -1), 4), lambda c: c((X, X_DST), BIPARTITE)),
    "SAGEConv-no-destination-features": (  # lin_r stays lazy, as in PyG
        lambda m: m.SAGEConv((-1, -1), 4),
        lambda c: c((X, None), BIPARTITE, size=(5, 3)),
    ),
    "SAGEConv-multi": (lambda m: m.SAGEConv(-1, 4, aggr=["mean", "max"]), lambda c: c(X, EDGES)),
    "GATConv-edges": (
        lambda m: m.GATConv(-1, 4, heads=2, edge_dim=-1, residual=True),
        lambda c: c(X, EDGES, EDGE_ATTR),
    ),
    "GATConv-no-edges": (  # PyG sizes the edge map only when there are edges to attend over
        lambda m: m.GATConv(-1, 4, edge_dim=-1, add_self_loops=False),
        lambda c: c(X, EDGES[:, :0], EDGE_ATTR[:0]),
    ),
    "GATConv-bipartite": (
        lambda m: m.GATConv((-1, -1), 4, heads=2, residual=True, add_self_loops=False),
        lambda c: c((X, X_DST), BIPARTITE),
    ),
    "GATConv-bipartite-maps-one-set": (
        lambda m: m.GATConv((-1, -1), 4, heads=2, residual=True),
        lambda c: c(X, EDGES),
    ),
}


def _assert_same_state(ours, theirs):
    assert ours.keys() == theirs.keys()
    for key in theirs:
        if is_lazy(theirs[key]):
            assert is_lazy(ours[key]), key
        else:
            assert torch.equal(ours[key], theirs[key]), key


def _snapshot(layer):
    """The state dict's values now (its tensors share the parameters' memory)."""
    return {k: v if is_lazy(v) else v.clone() for k, v in layer.state_dict().items()}


def _first_call(layer, case, seed=0):
    """The layer's state after its first call under ``seed``, and the generator's next draw."""
    torch.manual_seed(seed)
    LAZY[case][1](layer)
    return layer.state_dict(), torch.rand(3)


@pytest.mark.parametrize("case", sorted(LAZY))
def test_same_seed_materialises_pyg_weights(case):
    built = []
    for module in (pyg_nn, gnn):
        torch.manual_seed(0)
        layer = LAZY[case][0](module)
        LAZY[case][1](layer)
        first = (_snapshot(layer), torch.rand(3))
        layer.reset_parameters()  # sized now: every parameter drawn again
        built.append((first, (layer.state_dict(), torch.rand(3))))
    for (theirs, next_theirs), (ours, next_ours) in zip(*built):
        _assert_same_state(ours, theirs)
        assert torch.equal(next_ours, next_theirs)


def _built(module, case, seed=2):
    torch.manual_seed(seed)
    return LAZY[case][0](module)


@pytest.mark.parametrize("case", sorted(LAZY))
def test_lazy_state_dicts_load_both_ways_as_pyg(case):
    theirs, ours = _built(pyg_nn, case), _built(gnn, case)
    # A lazy state into a lazy layer: it stays lazy and its first call draws as PyG's.
    theirs.load_state_dict(_built(gnn, case).state_dict())
    ours.load_state_dict(_built(pyg_nn, case).state_dict())
    (theirs_state, next_theirs), (ours_state, next_ours) = (
        _first_call(layer, case) for layer in (theirs, ours)
    )
    _assert_same_state(ours_state, theirs_state)
    assert torch.equal(next_ours, next_theirs)
    # A materialised state into a lazy layer: its values, and the first call draws nothing.
    for target, source in ((gnn, theirs), (pyg_nn, ours)):
        fresh = _built(target, case, seed=3)
        fresh.load_state_dict(source.state_dict())
        generator = torch.get_rng_state()
        LAZY[case][1](fresh)
        assert torch.equal(torch.get_rng_state(), generator)
        _assert_same_state(fresh.state_dict(), source.state_dict())
    # A lazy state into a materialised layer makes it lazy again: the next call redraws.
    theirs.load_state_dict(_built(gnn, case).state_dict())
    ours.load_state_dict(_built(pyg_nn, case).state_dict())
    assert any(is_lazy(value) for value in ours.state_dict().values())
    (theirs_state, next_theirs), (ours_state, next_ours) = (
        _first_call(layer, case, seed=1) for layer in (theirs, ours)
    )
    _assert_same_state(ours_state, theirs_state)
    assert torch.equal(next_ours, next_theirs)


def test_lazy_cheb_of_any_k_draws_each_term_as_pyg_linear():
    """PyG's ChebConv calls the maps of terms 2.. by ``.forward``, past their lazy hook, so
    it runs lazily only for K <= 2; galfast sizes every term's map, in order, as PyG's
    ``Linear``s called in turn."""
    torch.manual_seed(0)
    theirs = pyg_nn.ChebConv(-1, 4, K=4)
    for lin in theirs.lins:
        lin(X)
    next_theirs = torch.rand(3)
    torch.manual_seed(0)
    ours = gnn.ChebConv(-1, 4, K=4)
    ours(X, EDGES)
    _assert_same_state(ours.state_dict(), theirs.state_dict())
    assert torch.equal(torch.rand(3), next_theirs)
