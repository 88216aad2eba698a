"""The routes of one aggregate call (issue 19: the fixed cost per call on small graphs): a plain
kernel launch when no gradient is wanted, the eager autograd.Function when one is, and the
checks that each route still makes."""

from __future__ import annotations

import pytest
import torch
from ref_aggregate import aggregate_ref

import galfast._dtypes as dtypes
from galfast import Graph
from galfast.ops import aggregate, block_aggregate, sample_neighbors


def ref_aggregate(g, x, weight=None, reduce="sum", norm=None):
    return aggregate_ref(g.num_nodes, g.col, g.row, x, weight, reduce, norm)


def _graph(weighted: bool = False) -> Graph:
    edge_index = torch.tensor([[0, 1, 2, 2, 3], [1, 2, 0, 1, 1]])
    weight = torch.tensor([0.5, 2.0, 1.0, 3.0, 0.25]) if weighted else None
    return Graph.from_edge_index(edge_index, 4, weight)


def test_a_call_without_gradient_builds_no_transpose_and_records_no_graph():
    g = _graph()
    x = torch.randn(4, 3, requires_grad=True)
    with torch.no_grad():
        out = aggregate(g, x, norm="gcn")
    frozen = aggregate(g, x.detach(), reduce="mean")
    assert "csc" not in g._cache  # only a backward reads the transpose
    assert out.grad_fn is None and not out.requires_grad and frozen.grad_fn is None
    torch.testing.assert_close(out, ref_aggregate(g, x.detach(), norm="gcn"))
    torch.testing.assert_close(frozen, ref_aggregate(g, x.detach(), reduce="mean"))


@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_the_gradient_route_returns_one_tensor_and_gives_both_gradients(reduce):
    g = _graph()
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    w = torch.rand(g.num_edges, dtype=torch.float64).add(0.5).requires_grad_()
    out = aggregate(g, x, w, reduce=reduce)
    assert isinstance(out, torch.Tensor) and "Eager" in type(out.grad_fn).__name__
    out.backward(torch.ones_like(out))
    x_ref, w_ref = x.detach().requires_grad_(), w.detach().requires_grad_()
    ref_aggregate(g, x_ref, w_ref, reduce=reduce).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad)
    torch.testing.assert_close(w.grad, w_ref.grad)


def test_only_the_inputs_that_need_a_gradient_get_one():
    g = _graph(weighted=True)
    x = torch.randn(4, 3, requires_grad=True)
    w = g.edge_weight.clone().requires_grad_()
    aggregate(g, x.detach(), w).sum().backward()
    assert x.grad is None and w.grad is not None
    aggregate(g, x, w.detach()).sum().backward()
    assert x.grad is not None


def test_the_graphs_own_weights_are_not_scanned_again_but_passed_ones_are(monkeypatch):
    g = _graph(weighted=True)
    x = torch.randn(4, 3)
    scans = []
    scan = dtypes.all_finite
    monkeypatch.setattr(dtypes, "all_finite", lambda t: scans.append(t) or scan(t))
    aggregate(g, x)  # the Graph scanned its weights when it was built
    assert scans == []
    aggregate(g, x, g.edge_weight.clone())
    assert len(scans) == 1
    with pytest.raises(ValueError, match="NaN or infinite"):
        aggregate(g, x, torch.full((g.num_edges,), float("nan")))


def test_an_in_place_edit_of_the_graphs_weights_is_still_refused():
    g = _graph(weighted=True)
    g.edge_weight[0] = float("nan")
    with pytest.raises(ValueError, match="edge_weight was modified in place"):
        aggregate(g, torch.randn(4, 3))


def test_block_aggregate_takes_the_same_routes():
    g = _graph()
    blocks = sample_neighbors(g, torch.tensor([1, 2]), [2], seed=0)
    block = blocks[0]
    x = torch.randn(block.num_src, 3, requires_grad=True)
    with torch.no_grad():
        plain = block_aggregate(block, x)
    traced = block_aggregate(block, x)
    assert plain.grad_fn is None and traced.grad_fn is not None
    torch.testing.assert_close(plain, traced.detach())
    traced.sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape
