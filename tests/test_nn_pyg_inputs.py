"""Graph and feature inputs in the forms PyG's layers read: PyG's ``EdgeIndex`` wrapper and a
bipartite ``x = (x_src, None)`` without ``size``, each against torch_geometric."""

from __future__ import annotations

import pytest
import torch
from _pyg_compat_cases import compare_layers

from galfast import nn as gnn

pyg_nn = pytest.importorskip("torch_geometric.nn")
EdgeIndex = pytest.importorskip("torch_geometric").EdgeIndex

EDGES = torch.tensor([[0, 1, 2, 3, 0, 4, 2], [1, 2, 0, 1, 3, 3, 4]])
NUM_NODES = 5

# name -> (layer of either library, whether its forward takes edge_attr)
LAYERS = {
    "gcn_unnormalized": (lambda lib: lib.GCNConv(6, 4, normalize=False), False),
    "gin": (lambda lib: lib.GINConv(torch.nn.Linear(6, 4), train_eps=True), False),
    "sage_mean": (lambda lib: lib.SAGEConv(6, 4), False),
    "sage_sum": (lambda lib: lib.SAGEConv(6, 4, aggr="sum"), False),
    "sage_max": (lambda lib: lib.SAGEConv(6, 4, aggr="max"), False),
    "sage_min": (lambda lib: lib.SAGEConv(6, 4, aggr="min"), False),
    "cheb": (lambda lib: lib.ChebConv(6, 4, K=3), False),
    "gat_no_loops": (lambda lib: lib.GATConv(6, 4, heads=2, add_self_loops=False), False),
    "nnconv_add": (lambda lib: lib.NNConv(6, 4, torch.nn.Linear(3, 24)), True),
    "nnconv_mean": (lambda lib: lib.NNConv(6, 4, torch.nn.Linear(3, 24), aggr="mean"), True),
}


def _edge_indices():
    """The same edges as PyG's EdgeIndex, unsorted and sorted by destination (the order its
    own layers prefer)."""
    unsorted = EdgeIndex(EDGES, sparse_size=(NUM_NODES, NUM_NODES))
    return {"unsorted": unsorted, "by_col": unsorted.sort_by("col")[0]}


@pytest.mark.parametrize("order", ["unsorted", "by_col"])
@pytest.mark.parametrize("name", list(LAYERS))
def test_edge_index_wrapper_matches_pyg(name, order):
    make, takes_edge_attr = LAYERS[name]
    torch.manual_seed(0)
    pyg, ours = make(pyg_nn), make(gnn)
    edge_index = _edge_indices()[order]
    gen = torch.Generator().manual_seed(1)
    inputs = {"x": torch.randn(NUM_NODES, 6, generator=gen)}
    if takes_edge_attr:
        inputs["edge_attr"] = torch.randn(EDGES.size(1), 3, generator=gen)
    compare_layers(pyg, ours, inputs, lambda c, t: c(t["x"], edge_index, *list(t.values())[1:]))


def test_bipartite_gat_takes_the_edge_index_wrapper():
    torch.manual_seed(0)
    kwargs = dict(heads=2, add_self_loops=False)
    pyg, ours = pyg_nn.GATConv((6, 5), 3, **kwargs), gnn.GATConv((6, 5), 3, **kwargs)
    edge_index = EdgeIndex(torch.tensor([[0, 1, 2, 3, 3], [0, 0, 1, 1, 2]]), sparse_size=(4, 3))
    gen = torch.Generator().manual_seed(1)
    inputs = {"src": torch.randn(4, 6, generator=gen), "dst": torch.randn(3, 5, generator=gen)}
    compare_layers(pyg, ours, inputs, lambda c, t: c((t["src"], t["dst"]), edge_index))


def test_compgcn_takes_the_edge_index_wrapper():
    conv = gnn.CompGCNConv(4, 3, num_relations=2).eval()
    x, rel = torch.randn(NUM_NODES, 4), torch.randn(4, 4)
    edge_type = torch.tensor([0, 1, 0, 1, 1, 0, 0])
    wrapped = EdgeIndex(EDGES, sparse_size=(NUM_NODES, NUM_NODES))
    for got, want in zip(conv(x, wrapped, edge_type, rel), conv(x, EDGES, edge_type, rel)):
        torch.testing.assert_close(got, want)


BIPARTITE = {
    "gat": lambda lib: lib.GATConv((3, 3), 2, heads=2),
    "gat_no_loops": lambda lib: lib.GATConv((3, 3), 2, add_self_loops=False),
    "gat_shared": lambda lib: lib.GATConv(3, 2),
    "sage": lambda lib: lib.SAGEConv((3, 3), 2),
    "sage_max": lambda lib: lib.SAGEConv((3, 3), 2, aggr="max"),
    "gin": lambda lib: lib.GINConv(torch.nn.Linear(3, 2)),
}


# size=(5, None) too, except where PyG's GATConv adds self loops (it fails on min(size) there).
CASES = [(name, None) for name in BIPARTITE] + [
    (name, (5, None)) for name in BIPARTITE if name not in ("gat", "gat_shared")
]


@pytest.mark.parametrize("name,size", CASES)
def test_missing_destination_count_defaults_to_the_source_count(name, size):
    """PyG: without x_dst and size[1] there are as many destinations as sources (5 here), not
    one more than the largest target (2)."""
    torch.manual_seed(0)
    pyg, ours = BIPARTITE[name](pyg_nn), BIPARTITE[name](gnn)
    edge_index = torch.tensor([[0, 1, 2, 3, 4], [0, 0, 1, 1, 1]])
    inputs = {"src": torch.randn(5, 3, generator=torch.Generator().manual_seed(1))}
    out = compare_layers(pyg, ours, inputs, lambda c, t: c((t["src"], None), edge_index, size=size))
    assert out.size(0) == 5


def test_missing_destination_count_still_bounds_the_targets():
    edge_index = torch.tensor([[0, 1], [0, 3]])
    with pytest.raises(ValueError, match="refers to node 3 but num_nodes is 2"):
        gnn.SAGEConv((3, 3), 2)((torch.randn(2, 3), None), edge_index)
