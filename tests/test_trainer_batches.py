"""Ready-made task batches: node, link (negative sampling), rating and graph mini-batches."""

import numpy as np
import pytest
import torch
from torch import nn

from galfast import Graph
from galfast.train import GraphBatches, LinkBatches, NodeBatches, RatingBatches


def test_node_batches_cover_every_node_once_per_epoch():
    nodes = torch.arange(10, 20)
    y = nodes * 2
    batches = NodeBatches(nodes, y, batch_size=3)
    assert len(batches) == 4
    seen = torch.cat([b.nodes for b in batches])
    assert sorted(seen.tolist()) == nodes.tolist()
    for b in batches:
        assert torch.equal(b.y, b.nodes * 2)
    full = list(NodeBatches(nodes, y, shuffle=False))
    assert len(full) == 1 and torch.equal(full[0].nodes, nodes)


def test_node_batches_take_lists_and_arrays():
    # A list of ids was an AttributeError ('list' object has no attribute 'dim').
    batches = NodeBatches([3, 1], np.array([0, 1]), shuffle=False)
    (batch,) = batches
    assert batch.nodes.tolist() == [3, 1] and batch.y.tolist() == [0, 1]


def test_shuffles_follow_torch_seed():
    batches = NodeBatches(torch.arange(50), torch.zeros(50), batch_size=10)
    torch.manual_seed(1)
    first = [b.nodes for b in batches]
    torch.manual_seed(1)
    again = [b.nodes for b in batches]
    assert all(torch.equal(a, b) for a, b in zip(first, again))


def test_link_batches_add_negatives():
    edges = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    batches = LinkBatches(edges, num_nodes=6, batch_size=3, negatives=2)
    out = list(batches)
    assert len(out) == len(batches) == 2
    first = out[0]
    assert first.src.numel() == 3 * 3 and first.label.tolist() == [1.0] * 3 + [0.0] * 6
    # Negatives corrupt the destination of their positive edge.
    assert torch.equal(first.src[3:], first.src[:3].repeat(2))
    assert int(first.dst.max()) < 6
    positives = {tuple(e) for e in edges.t().tolist()}
    for b in out:
        for s, d in zip(b.src[b.label == 1].tolist(), b.dst[b.label == 1].tolist()):
            assert (s, d) in positives


def test_rating_batches_map_ratings_to_levels():
    edges = torch.tensor([[0, 0, 1], [2, 3, 2]])
    batches = RatingBatches(
        edges, torch.tensor([5, 1, 3]), levels=[1, 2, 3, 4, 5], batch_size=None, shuffle=False
    )
    (batch,) = list(batches)
    assert batch.level.tolist() == [4, 0, 2]
    assert batch.rating.tolist() == [5.0, 1.0, 3.0]
    default = RatingBatches(edges, torch.tensor([5.0, 1.0, 3.0]))
    assert default.levels.tolist() == [1.0, 3.0, 5.0]


@pytest.mark.parametrize(
    "make, match",
    [
        (
            lambda: RatingBatches(torch.tensor([[0], [1]]), torch.tensor([6]), levels=[1, 2]),
            "levels",
        ),
        (lambda: RatingBatches(torch.tensor([[0], [1]]), torch.tensor([1, 2])), "shape"),
        (
            lambda: RatingBatches(torch.tensor([[0], [1]]), torch.tensor([1]), levels=[2, 1]),
            "increasing",
        ),
        (lambda: LinkBatches(torch.tensor([[0], [5]]), num_nodes=3), "num_nodes"),
        (lambda: LinkBatches(torch.tensor([0, 1]), num_nodes=3), "edge_index"),
        (lambda: LinkBatches(torch.tensor([[0], [1]]), num_nodes=3, negatives=-1), "negatives"),
        (lambda: NodeBatches(torch.arange(3), torch.zeros(4)), "rows"),
        (lambda: NodeBatches(torch.arange(3), torch.zeros(3), batch_size=0), "batch_size"),
        (lambda: NodeBatches(torch.zeros(3), torch.zeros(3)), "int64"),
        (lambda: NodeBatches([0.5, 1.0], torch.zeros(2)), "int64"),
        (lambda: NodeBatches(["a", "b"], torch.zeros(2)), "nodes must be a tensor"),
        (lambda: NodeBatches(torch.arange(2), torch.tensor(0.0)), "0 rows for 2 nodes"),
    ],
)
def test_bad_batch_inputs(make, match):
    with pytest.raises(ValueError, match=match):
        make()


class _SumPool(nn.Module):
    def forward(self, x, graph, batch):
        assert isinstance(graph, Graph) and graph.num_nodes == x.size(0)
        return torch.zeros(int(batch.max()) + 1, x.size(1)).index_add(0, batch, x)


def test_graph_batches_merge_graphs_block_diagonally():
    class Mol:
        def __init__(self, n, edges):
            self.x = torch.full((n, 2), float(n))
            self.edge_index = torch.tensor(edges).t()

    mols = [Mol(2, [[0, 1]]), Mol(3, [[0, 1], [1, 2]]), Mol(1, [[0, 0]])]
    batches = GraphBatches(mols, torch.tensor([10.0, 20.0, 30.0]), batch_size=2, shuffle=False)
    first, second = list(batches)
    assert first.ids.tolist() == [0, 1] and first.y.tolist() == [10.0, 20.0]
    assert first.batch.tolist() == [0, 0, 1, 1, 1]
    assert first.graph.num_nodes == 5
    assert sorted(first.graph.edge_index().t().tolist()) == [[0, 1], [2, 3], [3, 4]]
    z, ids = first.encode(_SumPool())
    assert z.tolist() == [[4.0, 4.0], [9.0, 9.0]] and ids.tolist() == [0, 1]
    assert second.ids.tolist() == [2] and second.graph.num_edges == 1
    with pytest.raises(ValueError, match="rows"):
        GraphBatches(mols, torch.zeros(2))
    with pytest.raises(ValueError, match="graph 0"):
        GraphBatches([object()], torch.zeros(1))


def _epoch(batches, seed=3):
    torch.manual_seed(seed)
    return [tuple(t.cpu() for t in vars(b).values()) for b in batches]


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["node", "link", "rating"])
def test_batches_on_a_gpu_are_the_cpu_ones_moved_there(kind):
    # The epoch's order is drawn on the CPU either way and copied once: the same batches.
    gen = torch.Generator().manual_seed(0)
    edge_index = torch.randint(30, (2, 200), generator=gen)
    ratings = torch.randint(1, 6, (200,), generator=gen)

    def make(device):
        if kind == "node":
            return NodeBatches(torch.arange(50).to(device), ratings[:50].to(device), batch_size=7)
        if kind == "link":
            return LinkBatches(edge_index.to(device), 30, batch_size=16, negatives=2)
        return RatingBatches(edge_index.to(device), ratings.to(device), batch_size=16)

    for got, want in zip(_epoch(make("cuda")), _epoch(make("cpu")), strict=True):
        for a, b in zip(got, want, strict=True):
            assert torch.equal(a, b)
    batch = next(iter(make("cuda")))
    assert all(t.device.type == "cuda" for t in vars(batch).values())


def test_index_batches_on_a_device_are_the_same_indices():
    from galfast.train.batch_indices import index_batches

    for shuffle in (False, True):
        torch.manual_seed(1)
        plain = list(index_batches(23, 5, shuffle))
        torch.manual_seed(1)
        placed = list(index_batches(23, 5, shuffle, device=torch.device("cpu")))
        assert [len(b) for b in plain] == [5, 5, 5, 5, 3]
        assert all(torch.equal(a, b) for a, b in zip(plain, placed, strict=True))


@pytest.mark.cuda
def test_to_device_without_waiting_copies_the_values():
    from galfast.train.encoding import to_device_without_waiting

    t = torch.randperm(1000)[:256]
    moved = to_device_without_waiting(t, torch.device("cuda"))
    assert moved.device.type == "cuda" and torch.equal(moved.cpu(), t)
    assert to_device_without_waiting(t, torch.device("cpu")) is t


@pytest.mark.parametrize(
    "build",
    [
        lambda **kw: NodeBatches(torch.arange(4), torch.zeros(4, dtype=torch.long), **kw),
        lambda **kw: LinkBatches(torch.tensor([[0, 1], [1, 2]]), 3, **kw),
        lambda **kw: RatingBatches(torch.tensor([[0, 1], [2, 3]]), torch.tensor([1.0, 2.0]), **kw),
    ],
)
def test_batches_check_shuffle_and_take_numpy_batch_sizes(build):
    # "no" is truthy: it shuffled; np.int64 batch sizes (from a grid) were refused
    with pytest.raises(ValueError, match="shuffle must be a bool, got str"):
        build(shuffle="no")
    batches = build(batch_size=np.int64(1), shuffle=np.False_)
    assert batches.batch_size == 1 and type(batches.batch_size) is int
    assert batches.shuffle is False
