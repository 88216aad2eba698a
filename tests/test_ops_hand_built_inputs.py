"""Graphs and Blocks built by hand, edited after building, or of a kind an op cannot take: each
gives the right answer or a clear ValueError, never a read of the wrong memory."""

from __future__ import annotations

import pytest
import torch

from galfast import Graph
from galfast.ops import (
    Block,
    aggregate,
    bilinear_edge_scores,
    block_aggregate,
    compgcn_aggregate,
    gat_aggregate,
    nnconv_aggregate,
    sample_neighbors,
    sample_nhop,
)


def _strided(values):
    """`values` as a non-contiguous view (every other element of a longer tensor)."""
    spread = torch.full((2 * len(values),), 99, dtype=torch.long)
    spread[::2] = torch.tensor(values)
    return spread[::2]


def test_graph_from_strided_index_tensors_reads_their_values():
    rowptr, col = _strided([0, 1, 2]), _strided([1, 0])
    assert not rowptr.is_contiguous()
    g = Graph(rowptr, col, 2)
    plain = Graph(rowptr.contiguous(), col.contiguous(), 2)
    x = torch.randn(2, 3)
    assert torch.equal(aggregate(g, x), aggregate(plain, x))
    assert torch.equal(aggregate(g, x), x.flip(0))
    h, alpha = torch.randn(2, 1, 3), torch.randn(2, 1)
    assert torch.equal(gat_aggregate(g, h, alpha, alpha), gat_aggregate(plain, h, alpha, alpha))
    blocks = sample_neighbors(g, torch.tensor([0, 1]), [-1], seed=0)
    assert blocks[0].src_nodes[blocks[0].col].tolist() == [1, 0]


def test_graph_from_strided_edge_type_reads_its_values():
    rowptr, col = torch.tensor([0, 1, 2]), torch.tensor([1, 0])
    types = _strided([0, 1])
    x, rel = torch.ones(2, 2), torch.stack([torch.zeros(2), 4 * torch.ones(2)])
    got = compgcn_aggregate(Graph(rowptr, col, 2, None, types), x, rel, composition="sub")
    plain = Graph(rowptr, col, 2, None, types.contiguous())
    want = compgcn_aggregate(plain, x, rel, composition="sub")
    assert torch.equal(got, want)
    assert torch.equal(got, torch.tensor([[1.0, 1.0], [-3.0, -3.0]]))


def test_graph_takes_pyg_index_wrappers():
    pyg = pytest.importorskip("torch_geometric")
    plain = torch.tensor([[0, 1, 2], [1, 2, 0]])
    wrapped = pyg.EdgeIndex(plain, sparse_size=(3, 3))
    assert wrapped.data_ptr() == 0  # no storage of its own: the reason for the unwrap
    x = torch.randn(3, 4)
    want = aggregate(Graph.from_edge_index(plain, 3), x)
    g = Graph.from_edge_index(wrapped, 3)
    assert type(g.col) is torch.Tensor
    assert torch.equal(aggregate(g, x), want)
    by_hand = Graph(pyg.Index(torch.tensor([0, 1, 2, 3])), pyg.Index(torch.tensor([2, 0, 1])), 3)
    assert torch.equal(aggregate(by_hand, x), want)


def test_huge_num_src_nodes_is_refused_before_allocating():
    with pytest.raises(ValueError, match="num_src_nodes is 1099511627776"):
        Graph(torch.tensor([0, 1]), torch.tensor([5]), 1, num_src_nodes=2**40)


@pytest.mark.parametrize(
    "call",
    [
        lambda g: sample_neighbors(g, torch.tensor([4]), [-1, -1], seed=0),
        lambda g: sample_nhop(g, torch.tensor([0]), hops=1, seed=0),
        lambda g: nnconv_aggregate(g, torch.randn(5, 2), torch.ones(3, 1), torch.ones(4, 1)),
        lambda g: compgcn_aggregate(g, torch.randn(5, 2), torch.randn(1, 2), composition="sub"),
    ],
    ids=["sample_neighbors", "sample_nhop", "nnconv_aggregate", "compgcn_aggregate"],
)
def test_ops_on_one_node_set_refuse_a_bipartite_graph(call):
    rowptr, col = torch.tensor([0, 0, 0, 0, 1, 3]), torch.tensor([1, 0, 1])
    g = Graph(rowptr, col, 5, None, torch.zeros(3, dtype=torch.long), num_src_nodes=2)
    with pytest.raises(ValueError, match="needs one node set.*2 source and 5 destination"):
        call(g)


def test_ops_refuse_a_meta_graph_by_name():
    with pytest.raises(ValueError, match="meta tensor"):
        Graph.from_edge_index(torch.tensor([[0, 1], [1, 2]], device="meta"), 4)
    empty = torch.empty(0, dtype=torch.long, device="meta")
    g = Graph(torch.zeros(4, dtype=torch.long, device="meta"), empty, 3)
    assert g.device.type == "meta"  # building one is fine (shapes only) ...
    with pytest.raises(ValueError, match="kernels run on CPU and CUDA tensors, not on meta"):
        aggregate(g, torch.randn(3, 2, device="meta"))  # ... running a kernel on it is not
    with pytest.raises(ValueError, match="not on meta"):
        sample_nhop(g, torch.tensor([0], device="meta"), hops=1, seed=0)


@pytest.mark.parametrize("x_dtype", [torch.float32, torch.float64])
def test_float64_weights_beyond_float32_are_refused_not_turned_into_nan(x_dtype):
    weight = torch.tensor([1e300, 1.0], dtype=torch.float64)
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 1]]), 2, weight)
    x = torch.ones(2, 3, dtype=x_dtype)
    block = sample_neighbors(g, torch.tensor([1]), [-1], seed=0)[0]
    rel, types = torch.zeros(1, 3, dtype=x_dtype), torch.zeros(2, dtype=torch.long)
    typed = Graph.from_edge_index(torch.tensor([[0, 1], [1, 1]]), 2, weight, edge_type=types)
    calls = [
        lambda: aggregate(g, x),
        lambda: block_aggregate(block, x[block.src_nodes], weight[block.edge_id]),
        lambda: compgcn_aggregate(typed, x, rel, composition="sub"),
    ]
    for call in calls:
        if x_dtype == torch.float64:
            assert torch.isfinite(call()).all()
        else:
            with pytest.raises(ValueError, match="beyond the range of x's dtype float32"):
                call()


def test_weights_within_range_convert_as_before():
    weight = torch.tensor([0.5, 2.0], dtype=torch.float64)
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 1]]), 2, weight)
    x = torch.randn(2, 3)
    assert torch.equal(aggregate(g, x), aggregate(g, x, weight.float()))


def _block(**changes):
    fields = dict(
        num_dst=2,
        src_nodes=torch.tensor([5, 6, 7]),
        rowptr=torch.tensor([0, 1, 3]),
        col=torch.tensor([2, 0, 2]),
        edge_id=torch.tensor([0, 1, 2]),
    )
    fields.update(changes)
    return Block(**fields)


def test_block_from_int32_or_strided_tensors_reads_their_values():
    x = torch.randn(3, 2)
    want = block_aggregate(_block(), x)
    assert torch.equal(want, torch.stack([x[2], x[0] + x[2]]))
    assert torch.equal(block_aggregate(_block(rowptr=torch.tensor([0, 1, 3]).int()), x), want)
    assert torch.equal(block_aggregate(_block(col=_strided([2, 0, 2])), x), want)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"num_dst": -1}, "num_dst must lie in"),
        ({"num_dst": 4}, "at least num_dst = 4"),
        ({"rowptr": torch.tensor([0, 1])}, "rowptr must have num_nodes \\+ 1 = 3 entries"),
        ({"col": torch.tensor([2, 0, 3])}, "must lie in \\[0, 3\\)"),
        ({"edge_id": torch.tensor([0, 1])}, "edge_id must have shape \\[3\\]"),
        ({"col": torch.tensor([2.0, 0.0, 2.0])}, "col must hold integer indices"),
    ],
)
def test_block_built_by_hand_is_checked(changes, message):
    with pytest.raises(ValueError, match=message):
        _block(**changes)


@pytest.mark.parametrize("reduce", ["sum", "max"])
def test_block_edited_in_place_is_refused(reduce):
    block = _block()
    x = torch.randn(3, 2, requires_grad=True)
    block_aggregate(block, x, reduce=reduce).sum().backward()  # derived tensors cached
    block.col[0] = 0
    with pytest.raises(ValueError, match="modified in place"):
        block_aggregate(block, x, reduce=reduce)


def test_sampled_blocks_stay_usable_and_move_devices():
    g = Graph.from_edge_index(
        torch.randint(0, 20, (2, 80), generator=torch.Generator().manual_seed(0))
    )
    (block,) = sample_neighbors(g, torch.tensor([0, 3]), [4], seed=1)
    assert block.to("cpu") is block
    x = torch.randn(block.num_src, 2)
    assert block_aggregate(block, x).shape == (2, 2)


def test_nnconv_without_output_features_is_refused():
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), 2)
    with pytest.raises(ValueError, match="out_features >= 1"):
        nnconv_aggregate(g, torch.ones(2, 2), torch.ones(2, 3), torch.ones(0, 3))


def test_edge_scores_on_no_rows_name_the_ids():
    args = (torch.randn(0, 3), torch.tensor([0]), torch.tensor([0]))
    with pytest.raises(ValueError, match="z has no rows"):
        bilinear_edge_scores(*args, torch.randn(1, 3, 3), torch.randn(1, 1))
