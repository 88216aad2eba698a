"""galfast.nn layers on sampled Blocks: with every in-edge sampled, a layer on a block gives
exactly the full-graph layer's rows for the block's destinations (GCN and Chebyshev through the
whole graph's degrees); stacks run a mini-batch's blocks outermost first; bad input."""

from __future__ import annotations

import pytest
import torch
from graphs import awkward_graphs, random_edges

from galfast import Graph
from galfast.nn import ChebConv, GATConv, GCNConv, GINConv, SAGEConv, layer_graphs
from galfast.ops import Block, sample_neighbors


def graphs() -> dict[str, Graph]:
    out = {}
    for name, (edge_index, n) in awkward_graphs().items():
        if n:
            out[name] = Graph.from_edge_index(edge_index, n)
    edges = random_edges(60, 400, seed=3)
    weight = torch.rand(edges.size(1), generator=torch.Generator().manual_seed(4)) + 0.1
    out["weighted_loops"] = Graph.from_edge_index(edges, 60, weight.double(), add_self_loops=True)
    return out


LAYERS = {
    "gcn": lambda: GCNConv(6, 5),
    "gcn_improved": lambda: GCNConv(6, 5, improved=True),
    "sage_mean": lambda: SAGEConv(6, 5),
    "sage_sum": lambda: SAGEConv(6, 5, aggr="sum"),
    "sage_max": lambda: SAGEConv(6, 5, aggr="max"),
    # PyG's own aggregation modules, run on the block's messages (order-free ones: a full block
    # may list a row's neighbours in another order than the graph).
    "sage_mean_max": lambda: SAGEConv(6, 5, aggr=["mean", "max"]),
    "sage_softmax": lambda: SAGEConv(6, 5, aggr="softmax"),
    "gat": lambda: GATConv(6, 3, heads=2),
    "gin": lambda: GINConv(torch.nn.Linear(6, 5), eps=0.3),
    "cheb1": lambda: ChebConv(6, 5, K=1),
    "cheb_sym": lambda: ChebConv(6, 5, K=2),
    "cheb_rw": lambda: ChebConv(6, 5, K=2, normalization="rw"),
    "cheb_none": lambda: ChebConv(6, 5, K=2, normalization=None),
}


# PyG's aggregation modules import torch.jit helpers that warn on first import.
@pytest.mark.filterwarnings("ignore::DeprecationWarning:torch.*")
@pytest.mark.parametrize("graph_name", list(graphs()))
@pytest.mark.parametrize("layer_name", list(LAYERS))
def test_a_layer_on_a_full_block_equals_the_full_graph_layer(graph_name, layer_name):
    graph = graphs()[graph_name]
    torch.manual_seed(0)
    layer = LAYERS[layer_name]().double()
    x = torch.randn(graph.num_nodes, 6, dtype=torch.float64)
    seeds = torch.randperm(graph.num_nodes)[: max(1, graph.num_nodes // 3)]
    (block,) = sample_neighbors(graph, seeds, [-1], seed=1)
    full = layer(x, graph)[seeds]
    h = x[block.src_nodes].requires_grad_()
    out = layer(h, block)
    torch.testing.assert_close(out, full, equal_nan=True)  # Laplacian None, no edges: 0 / 0
    out.sum().backward()  # differentiable in the block's features
    assert h.grad is not None and h.grad.shape == h.shape


@pytest.mark.parametrize("layer_name", ["gcn", "sage_mean", "gat", "cheb_sym"])
def test_a_two_layer_stack_on_full_blocks_equals_the_full_graph(layer_name):
    graph = Graph.from_edge_index(random_edges(80, 500, seed=5), 80)
    torch.manual_seed(1)
    first, second = LAYERS[layer_name]().double(), LAYERS[layer_name]().double()
    x = torch.randn(80, 6, dtype=torch.float64)
    seeds = torch.tensor([3, 17, 40, 79])
    blocks = sample_neighbors(graph, seeds, [-1, -1], seed=2)
    out_dim = first(x, graph).size(1)
    mix = torch.nn.Linear(out_dim, 6).double()

    def stack(h, g):
        g_first, g_second = layer_graphs(g, 2)
        return second(mix(first(h, g_first)).relu(), g_second)

    torch.testing.assert_close(stack(x[blocks[-1].src_nodes], blocks), stack(x, graph)[seeds])


def test_gcn_scales_sampled_neighbours_by_in_degree_over_sampled_degree():
    # A star: node 0 has 30 in-neighbours; a fan-out of 10 keeps 10, each scaled by 3.
    src = torch.arange(1, 31)
    graph = Graph.from_edge_index(torch.stack([src, torch.zeros_like(src)]), 31)
    layer = GCNConv(1, 1, bias=False).double()
    torch.nn.init.ones_(layer.lin.weight)
    x = torch.ones(31, 1, dtype=torch.float64)
    (block,) = sample_neighbors(graph, torch.tensor([0]), [10], seed=0)
    sampled = layer(x[block.src_nodes], block)
    torch.testing.assert_close(sampled, layer(x, graph)[:1])  # equal features: exact estimate


def test_bad_inputs_on_blocks_raise_clear_errors():
    graph = Graph.from_edge_index(random_edges(20, 60, seed=6), 20)
    (block,) = sample_neighbors(graph, torch.tensor([0, 1]), [-1], seed=0)
    x = torch.randn(block.num_src, 6)
    with pytest.raises(ValueError, match="K <= 2"):
        ChebConv(6, 4, K=3)(x, block)
    with pytest.raises(ValueError, match=r"num_src = "):
        SAGEConv(6, 4)(x[:-1], block)
    with pytest.raises(ValueError, match="edge_weight"):
        GCNConv(6, 4)(x, block, torch.ones(block.num_edges))
    bare = Block(block.num_dst, block.src_nodes, block.rowptr, block.col, block.edge_id)
    with pytest.raises(ValueError, match="sample_neighbors"):
        GCNConv(6, 4)(x, bare)
    with pytest.raises(ValueError, match="sampled blocks"):
        layer_graphs([block], 2)
