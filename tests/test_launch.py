"""The launch helpers every op shares (galfast/ops/_launch.py) and the aggregate's outputs."""

import pytest
import torch

from galfast import Graph
from galfast._native import _C
from galfast.ops._launch import run_kernel
from galfast.ops.aggregate import _MAX, _SUM, launch_aggregate


def test_run_kernel_refuses_a_device_without_kernels():
    with pytest.raises(ValueError, match="not on meta"):
        run_kernel("aggregate", _C.AggregateParams(), torch.device("meta"))


def _launch(graph, x, mode):
    empty = graph.rowptr.new_empty(0)
    return launch_aggregate(
        graph.rowptr, graph.col, None, None, None, None, None, empty, None, x, None, mode
    )


def test_a_sum_shares_one_empty_arg_and_max_gets_its_own():
    g = Graph.from_edge_index(torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]]), num_nodes=3)
    x = torch.randn(3, 5)
    (out1, arg1), (out2, arg2) = _launch(g, x, _SUM), _launch(g, x, _SUM)
    assert arg1 is arg2 and arg1.numel() == 0 and arg1.dtype == torch.long
    assert out1.data_ptr() != out2.data_ptr()
    torch.testing.assert_close(out1, out2)
    max_out, max_arg = _launch(g, x, _MAX)
    assert max_arg.shape == (3, 5) and max_arg is not _launch(g, x, _MAX)[1]
    # row 1 gathers nodes 0 and 2: the winning edge holds the larger value per feature
    winner = torch.where(x[0] >= x[2], 0, 1)
    edges_of_row_1 = g.rowptr[1] + winner
    assert torch.equal(max_arg[1], edges_of_row_1)
    torch.testing.assert_close(max_out[1], torch.maximum(x[0], x[2]))
