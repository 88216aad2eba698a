"""A Graph is valid by construction and stays so: bad tensors are refused when it is built,
in-place edits are refused at the next op, and edits no version counter sees (``.data``) end
in a ValueError from the kernels' bounds checks, never in a read out of bounds."""

import numpy as np
import pytest
import torch

from galfast import Graph
from galfast.graph import coalesce, lexsort
from galfast.nn import GCNConv
from galfast.ops import aggregate, gat_aggregate, sample_nhop


def _triangle() -> Graph:
    return Graph.from_edge_index(torch.tensor([[0, 1, 2], [1, 2, 0]]))


@pytest.mark.parametrize(
    "rowptr, col, num_nodes, message",
    [
        (torch.tensor([0, 1, 5]), torch.tensor([1, 0]), 2, "from 0 to num_edges"),
        (torch.tensor([1, 1, 2]), torch.tensor([1, 0]), 2, "from 0 to num_edges"),
        (torch.tensor([0, 2, 1, 2]), torch.tensor([1, 0]), 3, "non-decreasing"),
        (torch.tensor([0, 1, 2]), torch.tensor([1, 2]), 2, r"col holds node ids in \[1, 2\]"),
        (torch.tensor([0, 1, 2]), torch.tensor([-1, 0]), 2, "col holds node ids"),
        (torch.tensor([0, 1]), torch.tensor([0]), 2, "num_nodes \\+ 1 = 3 entries"),
        (torch.tensor([0.0, 1.0, 2.0]), torch.tensor([1, 0]), 2, "rowptr must hold integer"),
        (torch.tensor([0, 1, 2]), torch.tensor([True, False]), 2, "col must hold integer"),
        (torch.tensor([[0, 1, 2]]), torch.tensor([1, 0]), 2, "1-D"),
        ([0, 1, 2], torch.tensor([1, 0]), 2, "rowptr must be a torch.Tensor"),
        (torch.tensor([0, 1, 2]), torch.tensor([1, 0]), 3.5, "num_nodes must be an int"),
        (torch.tensor([0, 1, 2]), torch.tensor([1, 0]), 2.0, "num_nodes must be an int"),
        (torch.tensor([0, 1]), torch.tensor([0]), True, "bool"),
        (torch.tensor([0]), torch.tensor([], dtype=torch.long), -1, "num_nodes must lie in"),
    ],
)
def test_constructor_refuses_invalid_csr(rowptr, col, num_nodes, message):
    with pytest.raises(ValueError, match=message):
        Graph(rowptr, col, num_nodes)


def test_constructor_refuses_bad_edge_values():
    rowptr, col = torch.tensor([0, 1, 2]), torch.tensor([1, 0])
    with pytest.raises(ValueError, match="NaN or infinite"):
        Graph(rowptr, col, 2, edge_weight=torch.tensor([float("inf"), 1.0]))
    with pytest.raises(ValueError, match="floating point"):
        Graph(rowptr, col, 2, edge_weight=torch.tensor([1, 1]))
    with pytest.raises(ValueError, match=r"edge_weight must have shape \[2\]"):
        Graph(rowptr, col, 2, edge_weight=torch.ones(3))
    with pytest.raises(ValueError, match="negative relation id"):
        Graph(rowptr, col, 2, edge_type=torch.tensor([0, -1]))
    with pytest.raises(ValueError, match="edge_type must hold integer"):
        Graph(rowptr, col, 2, edge_type=torch.tensor([0.0, 1.0]))


def test_int32_and_integer_scalars_are_accepted_and_converted():
    g = Graph(
        torch.tensor([0, 1, 2], dtype=torch.int32),
        torch.tensor([1, 0], dtype=torch.int32),
        np.int64(2),
        edge_type=torch.tensor([0, 1], dtype=torch.int32),
    )
    assert g.rowptr.dtype == g.col.dtype == g.edge_type.dtype == torch.long
    assert type(g.num_nodes) is int and g.num_nodes == 2
    assert Graph(torch.tensor([0, 1, 2]), torch.tensor([1, 0]), torch.tensor(2)).num_nodes == 2
    out = aggregate(g, torch.ones(2, 3))
    assert torch.equal(out, torch.ones(2, 3))
    h = torch.ones(2, 1, 3)
    assert torch.equal(gat_aggregate(g, h, torch.zeros(2, 1), torch.zeros(2, 1)), h)


@pytest.mark.parametrize("num_nodes", [3.5, True, "3", None.__class__])
def test_from_edge_index_refuses_non_int_num_nodes(num_nodes):
    with pytest.raises(ValueError, match="num_nodes must be an int"):
        Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), num_nodes=num_nodes)


@pytest.mark.parametrize("flag", ["symmetrize", "add_self_loops"])
def test_from_edge_index_flags_are_true_or_false(flag):
    edge_index = torch.tensor([[0, 1], [1, 2]])
    for value in ("no", None, 1, 0.0, [True]):  # read by truth before: "no" symmetrized
        with pytest.raises(ValueError, match=f"{flag} must be a bool"):
            Graph.from_edge_index(edge_index, 3, **{flag: value})
    for value in (True, False):
        numpy_built = Graph.from_edge_index(edge_index, 3, **{flag: np.bool_(value)})
        plain = Graph.from_edge_index(edge_index, 3, **{flag: value})
        assert torch.equal(numpy_built.rowptr, plain.rowptr)
        assert torch.equal(numpy_built.col, plain.col)


@pytest.mark.parametrize("device", [None, 2.5, True, "gpu", -1])
def test_to_names_a_device_it_cannot_read(device):
    # torch.device raised a TypeError listing its overloads, or a RuntimeError
    with pytest.raises(ValueError, match="device must be a torch.device"):
        _triangle().to(device)


def test_fields_are_read_only():
    g = _triangle()
    for name in ("rowptr", "col", "num_nodes", "edge_weight", "edge_type"):
        with pytest.raises(AttributeError):
            setattr(g, name, None)


@pytest.mark.parametrize("field", ["rowptr", "col", "edge_weight"])
def test_ops_refuse_a_graph_edited_in_place(field):
    g = Graph.from_edge_index(torch.tensor([[0, 1, 2], [1, 2, 0]]), edge_weight=torch.ones(3))
    x = torch.randn(3, 2)
    aggregate(g, x)
    getattr(g, field).add_(0)  # same values, but the version moved
    message = f"Graph.{field} was modified in place"
    with pytest.raises(ValueError, match=message):
        aggregate(g, x)
    with pytest.raises(ValueError, match=message):
        gat_aggregate(g, torch.ones(3, 1, 2), torch.zeros(3, 1), torch.zeros(3, 1))
    with pytest.raises(ValueError, match=message):
        sample_nhop(g, torch.tensor([0]), 1, seed=0)


@pytest.mark.parametrize("bad", [10**12, -1, 3, 2**32 + 1])
def test_kernels_check_indices_edited_behind_the_version_counter(bad):
    g = _triangle()
    x = torch.randn(3, 2, requires_grad=True)
    _ = g.csc  # the transpose is cached: the kernels themselves meet the bad index
    g.col.data[0] = bad
    with pytest.raises(ValueError, match=r"aggregate: col\[0\] = .* lies outside \[0, 3\)"):
        aggregate(g, x)
    for reduce in ("max", "mean"):
        with pytest.raises(ValueError, match="lies outside"):
            aggregate(g, x, reduce=reduce)
    with pytest.raises(ValueError, match="gat_aggregate: col"):
        gat_aggregate(g, torch.ones(3, 1, 2), torch.zeros(3, 1), torch.zeros(3, 1))


@pytest.mark.parametrize("bad", [10**12, -1, 3])
def test_an_edit_after_the_first_sum_is_not_seen_by_the_sum_and_refused_by_max(bad):
    # The CPU sum reads a private int32 copy of col, made on the graph's first sum (issue 19):
    # an edit behind the version counter after that does not reach it (as the walk's
    # adjacency); max, which reads col itself, still refuses it.
    g = _triangle()
    x = torch.randn(3, 2, requires_grad=True)
    before = aggregate(g, x)
    g.col.data[0] = bad
    torch.testing.assert_close(aggregate(g, x), before)
    with pytest.raises(ValueError, match=r"aggregate: col\[0\] = .* lies outside \[0, 3\)"):
        aggregate(g, x, reduce="max")


def test_kernels_check_row_offsets_edited_behind_the_version_counter():
    g = _triangle()
    x = torch.randn(3, 2)
    _ = g.csc  # the transpose is cached: the kernel itself meets the bad offsets
    g.rowptr.data[1] = 2**40
    with pytest.raises(ValueError, match=r"aggregate: rowptr\[1\] = 1099511627776"):
        aggregate(g, x)
    with pytest.raises(ValueError, match="gat_aggregate: rowptr"):
        gat_aggregate(g, torch.ones(3, 1, 2), torch.zeros(3, 1), torch.zeros(3, 1))
    g.rowptr.data[1] = 1
    g.rowptr.data[2] = 0  # decreasing
    with pytest.raises(ValueError, match="non-decreasing"):
        aggregate(g, x)
    with pytest.raises(ValueError, match="rowptr must be non-decreasing"):
        _ = _triangle_with_rowptr(g.rowptr).csc  # derived structure comes from checked tensors


def _triangle_with_rowptr(rowptr):
    g = _triangle()
    g.rowptr.data.copy_(rowptr)
    return g


def test_backward_checks_the_transpose():
    g = _triangle()
    x = torch.randn(3, 2, requires_grad=True)
    csc = g.csc
    csc.row.data[0] = 7
    with pytest.raises(ValueError, match="lies outside"):
        aggregate(g, x).sum().backward()
    h = torch.ones(3, 1, 2, requires_grad=True)
    out = gat_aggregate(g, h, torch.zeros(3, 1), torch.zeros(3, 1))
    with pytest.raises(ValueError, match="gat_aggregate backward: csc_row"):
        out.sum().backward()


def test_walk_adjacency_is_private_and_checked():
    g = _triangle()
    assert sample_nhop(g, torch.tensor([0]), 1, seed=0).tolist() == [1]
    g.col.data[:] = 0  # after the walk's adjacency was built: the walk does not see it
    assert sample_nhop(g, torch.tensor([0]), 1, seed=0).tolist() == [1]
    g2 = _triangle()
    g2.col.data[0] = 10**6  # before: the adjacency build refuses it
    with pytest.raises((ValueError, RuntimeError)):
        sample_nhop(g2, torch.tensor([0]), 1, seed=0)


def test_edge_type_sort_key_cannot_overflow():
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])
    g = Graph.from_edge_index(
        edge_index, edge_type=torch.tensor([2**62, 0, 4]), edge_weight=torch.tensor([1.0, 2.0, 3.0])
    )
    assert g.num_edges == 3
    assert g.edge_type.tolist() == [4, 2**62, 0]
    assert g.edge_weight.tolist() == [3.0, 1.0, 2.0]


def test_lexicographic_fallback_matches_the_packed_key():
    torch.manual_seed(0)
    a, b, c = torch.randint(0, 5, (3, 200))
    small_keys, small_inverse = coalesce([a, b, c], [5, 5, 5])
    big_keys, big_inverse = coalesce([a, b, c], [5, 2**40, 2**40])  # product > 2^63
    assert all(torch.equal(x, y) for x, y in zip(small_keys, big_keys))
    assert torch.equal(small_inverse, big_inverse)
    assert torch.equal(lexsort([a, b], [5, 5]), lexsort([a, b], [2**40, 2**40]))


def test_layer_cache_sees_edits_through_data():
    torch.manual_seed(0)
    conv = GCNConv(4, 3)
    x = torch.randn(4, 4)
    ei = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    conv(x, ei)
    ei.data[1, 0] = 0
    assert torch.equal(conv(x, ei), conv(x, ei.clone()))
    ei.numpy()[1, 1] = 0
    assert torch.equal(conv(x, ei), conv(x, ei.clone()))


@pytest.mark.parametrize(
    "build",
    [
        lambda: Graph.from_edge_index(torch.tensor([[0, 1], [1, 2**40]])),
        lambda: Graph.from_edge_index(torch.tensor([[0, 1], [1, 2]]), num_nodes=2**40),
    ],
    ids=["stray id", "declared"],
)
def test_a_node_count_beyond_the_machines_memory_is_refused_before_allocating(build):
    # 2**40 nodes need 40 TiB of node arrays: allocating them would get the process killed.
    with pytest.raises(ValueError, match=r"10995116277(76|77) nodes.*more than the"):
        build()
