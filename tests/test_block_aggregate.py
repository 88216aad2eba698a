"""galfast.ops.block_aggregate: a GNN over sampled blocks with unlimited fan-outs equals the
full-graph GNN restricted to the seeds; agreement with aggregate on the block's square view;
gradients in float64; bad input."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
from graphs import awkward_graphs, random_edges

from galfast import Graph
from galfast.ops import aggregate, block_aggregate, sample_neighbors


def symmetric_graph() -> Graph:
    return Graph.from_edge_index(
        random_edges(300, 1500, seed=11), 300, symmetrize=True, add_self_loops=True
    )


def gcn_weight(graph: Graph, block) -> torch.Tensor:
    """The full graph's GCN normalisation 1 / sqrt(d_i d_j) on the block's edges."""
    inv_sqrt = graph.degree_scale("gcn", torch.float64)
    return inv_sqrt[block.dst_nodes][block.row] * inv_sqrt[block.src_nodes][block.col]


@pytest.mark.parametrize("fanouts", [[-1, -1], [10**6, 10**6]])
def test_two_layer_gcn_over_blocks_equals_the_full_graph_gcn(fanouts):
    graph = symmetric_graph()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(graph.num_nodes, 8, generator=g, dtype=torch.float64)
    w1 = torch.randn(8, 16, generator=g, dtype=torch.float64)
    w2 = torch.randn(16, 4, generator=g, dtype=torch.float64)
    seeds = torch.randperm(graph.num_nodes, generator=g)[:40]

    full = aggregate(graph, torch.relu(aggregate(graph, x, norm="gcn") @ w1), norm="gcn") @ w2

    blocks = sample_neighbors(graph, seeds, fanouts, seed=5)
    h = x[blocks[-1].src_nodes].requires_grad_()
    out = h
    for k, block in enumerate(reversed(blocks)):
        out = block_aggregate(block, out, gcn_weight(graph, block))
        out = torch.relu(out @ w1) if k == 0 else out @ w2
    torch.testing.assert_close(out, full[seeds])

    # the gradient reaches exactly the nodes the seeds' outputs depend on
    out.sum().backward()
    xs = x.clone().requires_grad_()
    full = aggregate(graph, torch.relu(aggregate(graph, xs, norm="gcn") @ w1), norm="gcn") @ w2
    full[seeds].sum().backward()
    torch.testing.assert_close(h.grad, xs.grad[blocks[-1].src_nodes])
    untouched = torch.ones(graph.num_nodes, dtype=torch.bool)
    untouched[blocks[-1].src_nodes] = False
    assert bool((xs.grad[untouched] == 0).all())


@pytest.mark.parametrize("name", list(awkward_graphs()))
@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_aggregate_on_the_square_view(name, reduce, weighted):
    edge_index, num_nodes = awkward_graphs()[name]
    graph = Graph.from_edge_index(edge_index, num_nodes)
    seeds = torch.arange(min(num_nodes, 7))
    block = sample_neighbors(graph, seeds, [3, 2], seed=1)[1]  # a block with real sources
    g = torch.Generator().manual_seed(1)
    x = torch.randn(block.num_src, 5, generator=g, dtype=torch.float64)
    weight = torch.rand(block.num_edges, generator=g, dtype=torch.float64) if weighted else None
    out = block_aggregate(block, x, weight, reduce=reduce)
    expected = aggregate(block.as_graph(), x, weight, reduce=reduce)[: block.num_dst]
    assert out.shape == (block.num_dst, 5)
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_gradcheck_float64(reduce):
    graph = Graph.from_edge_index(random_edges(30, 120, seed=3), 30)
    block = sample_neighbors(graph, torch.tensor([0, 5, 9, 11]), [3, 3], seed=2)[1]
    g = torch.Generator().manual_seed(4)
    x = torch.randn(block.num_src, 3, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.rand(block.num_edges, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda x, w: block_aggregate(block, x, w, reduce=reduce), (x, w)
    )


def test_bad_input_raises_a_clear_error():
    graph = Graph.from_edge_index(random_edges(30, 120, seed=3), 30)
    block = sample_neighbors(graph, torch.tensor([0, 5]), [3, 3], seed=2)[1]
    x = torch.randn(block.num_src, 3)
    cases = [
        (("b", x), {}, "block must be a galfast.ops.Block"),
        ((block, x[:-1]), {}, "x must have shape"),
        ((block, x.long()), {}, "dtype"),
        ((block, x), {"reduce": "min"}, "reduce must be one of"),
        ((block, x, torch.ones(block.num_edges + 1)), {}, "edge_weight must have shape"),
        ((block, x, torch.full((block.num_edges,), float("nan"))), {}, "NaN"),
    ]
    for args, kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            block_aggregate(*args, **kwargs)


@pytest.mark.parametrize(
    "copy_block",
    [copy.copy, copy.deepcopy, lambda b: pickle.loads(pickle.dumps(b))],
    ids=["copy", "deepcopy", "pickle"],
)
def test_copies_and_pickles_of_a_block_aggregate_as_the_block(copy_block):
    # A DataLoader worker pickles its batches: unpickled tensors restart their version
    # counters, which the edit check read as an edit of every field.
    graph = symmetric_graph()
    block = sample_neighbors(graph, torch.arange(20), [5], seed=3)[0]
    x = torch.randn(block.num_src, 4, dtype=torch.float64)
    expected = block_aggregate(block, x, reduce="mean")
    other = copy_block(block)
    assert torch.equal(block_aggregate(other, x, reduce="mean"), expected)
    other.col.add_(0)
    with pytest.raises(ValueError, match="Block.col was modified in place"):
        block_aggregate(other, x)


def test_an_edited_pickle_of_a_block_is_checked_as_a_new_block():
    block = sample_neighbors(symmetric_graph(), torch.arange(20), [5], seed=3)[0]
    state = block.__getstate__()
    state["col"] = state["col"].clone().fill_(block.num_src)
    with pytest.raises(ValueError, match="col"):
        pickle.loads(pickle.dumps(block)).__setstate__(state)
    with pytest.raises(ValueError, match="pickled state"):
        pickle.loads(pickle.dumps(block)).__setstate__({"col": block.col})


def test_a_block_s_derived_tensor_edited_in_place_is_refused():
    block = sample_neighbors(symmetric_graph(), torch.arange(20), [5], seed=3)[0]
    x = torch.randn(block.num_src, 4)
    block_aggregate(block, x, reduce="mean")
    block.in_degree.fill_(1)
    with pytest.raises(ValueError, match="Block's derived in_degree was modified in place"):
        block_aggregate(block, x, reduce="mean")
