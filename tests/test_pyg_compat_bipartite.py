"""Bipartite ``(x_src, x_dst)`` inputs for SAGEConv, GINConv and GATConv against PyG (the
edge_index, sparse and Graph forms), batched graphs from PyG's Batch, and the rectangular
aggregation ops underneath."""

from __future__ import annotations

import pytest
import torch
from _pyg_compat_cases import compare_layers
from ref_aggregate import aggregate_ref
from ref_gat_aggregate import gat_aggregate_reference

import galfast
from galfast import nn as gnn
from galfast.ops import aggregate, gat_aggregate

pyg_nn = pytest.importorskip("torch_geometric.nn")
pyg_data = pytest.importorskip("torch_geometric.data")

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CS. tensor support is in beta")


def bipartite_edges(num_src: int, num_dst: int, num_edges: int, seed: int = 0) -> torch.Tensor:
    """Random source -> destination edges with duplicates, destinations left without edges,
    and one destination receiving from every source (a hub)."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_src, (num_edges,), generator=gen)
    dst = torch.randint(0, max(num_dst - 2, 1), (num_edges,), generator=gen)
    hub = torch.stack([torch.arange(num_src), torch.zeros(num_src, dtype=torch.long)])
    return torch.cat([torch.stack([src, dst]), hub, torch.stack([src[:3], dst[:3]])], 1)


# (num_src, num_dst): more sources than destinations, and fewer (MovieLens has both ways).
SHAPES = [(9, 5), (4, 7)]


def _features(num_src, num_dst, c_src=6, c_dst=5):
    gen = torch.Generator().manual_seed(1)
    return torch.randn(num_src, c_src, generator=gen), torch.randn(num_dst, c_dst, generator=gen)


def _layers():
    return {
        "sage_mean": lambda lib: lib.SAGEConv((6, 5), 4),
        "sage_max": lambda lib: lib.SAGEConv((6, 5), 4, aggr="max"),
        "sage_project": lambda lib: lib.SAGEConv((6, 5), 4, project=True, normalize=True),
        "gin": lambda lib: lib.GINConv(torch.nn.Linear(6, 4), train_eps=True),
        "gat": lambda lib: lib.GATConv((6, 5), 3, heads=2),
        "gat_no_loops": lambda lib: lib.GATConv((6, 5), 3, heads=2, add_self_loops=False),
        "gat_shared": lambda lib: lib.GATConv(6, 3, heads=2, residual=True),
    }


def _needs_same_width(name):
    return name in ("gin", "gat_shared")


@pytest.mark.parametrize("shape", SHAPES, ids=["wide", "tall"])
@pytest.mark.parametrize("layer", list(_layers()))
def test_bipartite_matches_pyg(shape, layer):
    num_src, num_dst = shape
    x_src, x_dst = _features(num_src, num_dst, 6, 6 if _needs_same_width(layer) else 5)
    edge_index = bipartite_edges(num_src, num_dst, 20)
    pyg, ours = (_layers()[layer](lib) for lib in (pyg_nn, gnn))
    inputs = {"src": x_src, "dst": x_dst}
    compare_layers(pyg, ours, inputs, lambda c, t: c((t["src"], t["dst"]), edge_index))
    size = (num_src, num_dst)
    compare_layers(pyg, ours, inputs, lambda c, t: c((t["src"], t["dst"]), edge_index, size=size))
    # Without destination features (no root / destination term), the size says num_dst.
    compare_layers(pyg, ours, inputs, lambda c, t: c((t["src"], None), edge_index, size=size))


@pytest.mark.parametrize("layer", ["sage_mean", "gin", "gat"])
def test_bipartite_sparse_and_graph_forms(layer):
    num_src, num_dst = 9, 5
    x_src, x_dst = _features(num_src, num_dst, 6, 6 if layer == "gin" else 5)
    edge_index = torch.unique(bipartite_edges(num_src, num_dst, 20), dim=1)
    ones = torch.ones(edge_index.size(1))
    adj_t = torch.sparse_coo_tensor(
        edge_index.flip(0), ones, (num_dst, num_src), check_invariants=True
    ).coalesce()
    pyg, ours = (_layers()[layer](lib) for lib in (pyg_nn, gnn))
    inputs = {"src": x_src, "dst": x_dst}
    for adj in (adj_t, adj_t.to_sparse_csr()):
        compare_layers(pyg, ours, inputs, lambda c, t, adj=adj: c((t["src"], t["dst"]), adj))
    graph = galfast.nn._graph_input.layer_graph(edge_index, num_dst, num_src).graph
    assert graph.is_bipartite and graph.num_src_nodes == num_src
    ours.load_state_dict(pyg.state_dict())
    expected = ours((x_src, x_dst), edge_index)
    torch.testing.assert_close(ours((x_src, x_dst), graph), expected)


def test_bipartite_bad_inputs():
    conv = gnn.SAGEConv((6, 5), 4)
    x_src, x_dst = _features(9, 5)
    edge_index = bipartite_edges(9, 5, 10)
    with pytest.raises(ValueError, match="source node 8 but there are 3 source nodes"):
        conv((x_src[:3], x_dst), edge_index)
    with pytest.raises(ValueError, match="target node"):
        conv((x_src, x_dst[:2]), edge_index)
    with pytest.raises(ValueError, match="size gives num_dst = 4 but x has 5 rows"):
        conv((x_src, x_dst), edge_index, size=(9, 4))
    with pytest.raises(ValueError, match="one node set"):
        gnn.GCNConv(6, 4)((x_src, x_dst), edge_index)
    with pytest.raises(ValueError, match="one node set"):
        gnn.GCNConv((6, 5), 4)


def test_rectangular_ops_match_references():
    edge_index = bipartite_edges(9, 5, 30)
    graph = galfast.nn._graph_input.csr_from_coo(edge_index[1], edge_index[0], 5, 9)[0]
    assert repr(graph).startswith("Graph(num_nodes=5, num_src_nodes=9")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(9, 4, dtype=torch.float64, generator=gen, requires_grad=True)
    weight = torch.rand(graph.num_edges, dtype=torch.float64, generator=gen, requires_grad=True)
    for reduce in ("sum", "mean", "max"):
        torch.testing.assert_close(
            aggregate(graph, x, weight, reduce=reduce),
            aggregate_ref(5, graph.col, graph.row, x, weight, reduce=reduce),
        )
        run = lambda a, w, r=reduce: aggregate(graph, a, w, reduce=r)  # noqa: E731
        torch.autograd.gradcheck(run, (x, weight))
    with pytest.raises(ValueError, match="bipartite"):
        aggregate(graph, x, norm="gcn")
    with pytest.raises(ValueError, match="9 source nodes"):
        aggregate(graph, x[:5])
    h = torch.randn(9, 2, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    a_src = torch.randn(9, 2, dtype=torch.float64, generator=gen, requires_grad=True)
    a_dst = torch.randn(5, 2, dtype=torch.float64, generator=gen, requires_grad=True)
    a_edge = torch.randn(graph.num_edges, 2, dtype=torch.float64, generator=gen)
    a_edge.requires_grad_(True)
    expected = gat_aggregate_reference(graph, h, a_src, a_dst, 0.2, alpha_edge=a_edge)
    torch.testing.assert_close(gat_aggregate(graph, h, a_src, a_dst, a_edge), expected)
    torch.autograd.gradcheck(
        lambda *t: gat_aggregate(graph, *t), (h, a_src, a_dst, a_edge), atol=1e-6
    )


def test_batch_from_pyg_dataloader_form():
    gen = torch.Generator().manual_seed(4)
    graphs = [
        pyg_data.Data(
            x=torch.randn(n, 8, generator=gen),
            edge_index=torch.randint(0, n, (2, 2 * n), generator=gen),
            edge_weight=torch.rand(2 * n, generator=gen) + 0.5,
        )
        for n in (4, 6, 3)
    ]
    batch = pyg_data.Batch.from_data_list(graphs)
    graph = galfast.Graph.from_data(batch)
    assert graph.num_nodes == 13 and graph.edge_weight is not None
    # A layer on the batch equals the layer on each graph (ChebConv with the batch vector and
    # one lambda_max per graph, GCN on the prebuilt Graph).
    cheb = gnn.ChebConv(8, 5, K=3)
    lambdas = torch.tensor([1.5, 2.0, 3.0])
    out = cheb(batch.x, batch.edge_index, batch.edge_weight, batch.batch, lambdas)
    pyg = pyg_nn.ChebConv(8, 5, K=3)
    pyg.load_state_dict(cheb.state_dict())
    expected = pyg(batch.x, batch.edge_index, batch.edge_weight, batch.batch, lambdas)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)
    start = 0
    for data, lam in zip(graphs, lambdas):
        n = data.num_nodes
        alone = cheb(data.x, data.edge_index, data.edge_weight, None, float(lam))
        torch.testing.assert_close(out[start : start + n], alone, atol=1e-5, rtol=1e-4)
        start += n
    # The Batch's Graph is the whole batch: GIN on it equals GIN on each graph.
    gin = gnn.GINConv(torch.nn.Linear(8, 5))
    whole = gin(batch.x, graph)
    start = 0
    for data in graphs:
        n = data.num_nodes
        alone = gin(data.x, galfast.Graph.from_data(data))
        torch.testing.assert_close(whole[start : start + n], alone)
        start += n


def test_from_data_refusals():
    with pytest.raises(ValueError, match="HeteroData"):
        galfast.Graph.from_data(pyg_data.HeteroData())
    with pytest.raises(ValueError, match="edge_index"):
        galfast.Graph.from_data(pyg_data.Data(x=torch.zeros(3, 1)))
