"""csr_from_coo on edges already in (row, col) order (issue 19, a whole MovieLens run: a
Graph's edges less its self loops, 1.8M of them) keeps them in place without sorting; any
input gives the graph and order of the stable sort."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from galfast.graph import lexsort
from galfast.nn._graph_input import csr_from_coo


class _RecordSorts(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.sorts = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.sorts += func.__name__.startswith("sort")
        return func(*args, **(kwargs or {}))


def _expected(rows, cols, n):
    order = lexsort([rows, cols], [n, n])
    return rows[order], cols[order], order


def _cases():
    gen = torch.Generator().manual_seed(0)
    rows, cols = torch.randint(0, 30, (2, 400), generator=gen)
    keys = rows * 30 + cols
    ordered = torch.argsort(keys, stable=True)
    return {
        "sorted with ties": (rows[ordered], cols[ordered]),
        "unsorted": (rows, cols),
        "rows sorted, cols not": (rows.sort().values, cols),
        "empty": (torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long)),
        "one edge": (torch.tensor([3]), torch.tensor([1])),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_same_graph_and_order_as_the_stable_sort(name):
    rows, cols = _cases()[name]
    graph, order = csr_from_coo(rows, cols, 30)
    exp_rows, exp_cols, exp_order = _expected(rows, cols, 30)
    assert torch.equal(order, exp_order)
    assert torch.equal(graph.col, exp_cols) and torch.equal(graph.row, exp_rows)
    assert graph.col.data_ptr() != cols.data_ptr() or cols.numel() == 0


def test_sorted_input_is_not_sorted_again():
    rows, cols = _cases()["sorted with ties"]
    with _RecordSorts() as mode:
        csr_from_coo(rows, cols, 30)
    assert mode.sorts == 0
    rows, cols = _cases()["unsorted"]
    with _RecordSorts() as mode:
        csr_from_coo(rows, cols, 30)
    assert mode.sorts == 1


def test_removing_self_loops_from_a_graph_neither_sorts_nor_masks_thrice():
    from galfast import Graph
    from galfast.nn.norm import self_loops_removed

    gen = torch.Generator().manual_seed(1)
    edges = torch.randint(0, 25, (2, 300), generator=gen)
    edges[:, :20] = torch.arange(20).repeat(2, 1)  # self loops
    graph = Graph.from_edge_index(edges, 25)

    class RecordOps(TorchDispatchMode):
        names: list = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(func.__name__.split(".")[0])
            return func(*args, **(kwargs or {}))

    with RecordOps() as mode:
        derived, source = self_loops_removed(graph)
    assert "sort" not in mode.names and mode.names.count("nonzero") == 1
    keep = graph.row != graph.col
    assert torch.equal(source, torch.arange(graph.num_edges)[keep])
    assert torch.equal(derived.col, graph.col[keep]) and torch.equal(derived.row, graph.row[keep])
    assert torch.equal(
        derived.rowptr[1:] - derived.rowptr[:-1], torch.bincount(graph.row[keep], minlength=25)
    )
