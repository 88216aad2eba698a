"""aggregate on graphs that have nodes but no edges (an empty col array has no data pointer)."""

from __future__ import annotations

import pytest
import torch

import galfast
from galfast.ops import aggregate


@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
@pytest.mark.parametrize("weighted", [False, True])
def test_edgeless_graph_gives_zeros_and_zero_gradients(reduce, weighted):
    graph = galfast.Graph.from_edge_index(torch.empty(2, 0, dtype=torch.long), num_nodes=4)
    x = torch.randn(4, 3, requires_grad=True)
    weight = torch.empty(0, requires_grad=True) if weighted else None
    out = aggregate(graph, x, weight, reduce=reduce)
    assert torch.equal(out, torch.zeros(4, 3))
    out.sum().backward()
    assert torch.equal(x.grad, torch.zeros(4, 3))
    if weighted:
        assert weight.grad.shape == (0,)
