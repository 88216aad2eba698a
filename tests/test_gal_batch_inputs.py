"""Inputs users pass to the task batches, the task losses and the adversary losses: bad ones
raise a ValueError naming the argument when the object is built or fit starts, not a raw
error from deep inside or silently wrong training."""

import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from galfast import GALTrainer, Graph
from galfast.gal import SensitiveAttribute, tv_loss, wasserstein_gap
from galfast.train import GraphBatches, LinkBatches, NodeBatches, RatingBatches
from galfast.train.tasks import GraphHead, NodeHead, classification_loss, regression_loss

N = 8


class _Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 8)

    def forward(self, x, graph):
        return self.lin(x)


def _fit(batches):
    edges = torch.tensor([list(range(N - 1)), list(range(1, N))])
    graph = Graph.from_edge_index(edges, N)
    trainer = GALTrainer(
        _Linear(), NodeHead(nn.Linear(8, 2)), None, task_loss=classification_loss, lam=0.0
    )
    return trainer.fit(graph, batches, epochs=1, x=torch.randn(N, 4), progress=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool])
def test_classification_labels_of_a_float_or_bool_dtype_are_named(dtype):
    # Was a RuntimeError from ATen: "expected target dtype to be Long or Byte, but got Float".
    y = torch.tensor([0, 1] * (N // 2)).to(dtype)
    with pytest.raises(ValueError, match="batch.y must hold integer class ids"):
        _fit(NodeBatches(torch.arange(N), y))


def test_int32_class_labels_train():
    # Was a RuntimeError ("expected target dtype to be Long or Byte, but got Int").
    (record,) = _fit(NodeBatches(torch.arange(N), torch.tensor([0, 1] * (N // 2)).int()))
    assert math.isfinite(record["task_loss"])


def test_a_column_of_class_labels_is_named():
    # Was a RuntimeError: "0D or 1D target tensor expected, multi-target not supported".
    y = torch.tensor([0, 1] * (N // 2)).view(-1, 1)
    with pytest.raises(ValueError, match=r"batch.y must hold one class id per row.*\[B, 1\]"):
        _fit(NodeBatches(torch.arange(N), y))


def test_node_ids_edited_negative_after_building_are_refused_at_fit():
    # Were read from the end of the embeddings: node 7 trained with node 0's label.
    batches = NodeBatches(torch.arange(N), torch.tensor([0, 1] * (N // 2)))
    batches.nodes[0] = -1
    with pytest.raises(ValueError, match="nodes holds a negative node id"):
        _fit(batches)


def test_node_listed_twice_with_different_targets_is_refused():
    # Trained towards two labels at once; a repeat with the same label is oversampling.
    with pytest.raises(ValueError, match="node 1 twice with different targets"):
        NodeBatches(torch.tensor([1, 2, 1]), torch.tensor([0, 1, 1]))
    with pytest.raises(ValueError, match="node 2 twice with different targets"):
        NodeBatches(torch.tensor([2, 0, 2]), torch.tensor([[0.5, 1.0], [0.0, 0.0], [0.5, 2.0]]))
    oversampled = NodeBatches(torch.tensor([1, 2, 1]), torch.tensor([1, 0, 1]), shuffle=False)
    assert [b.nodes.tolist() for b in oversampled] == [[1, 2, 1]]


def test_batch_size_set_to_zero_after_building_is_refused():
    # Yielded an endless-looking run of empty batches (one per node).
    batches = NodeBatches(torch.arange(4), torch.zeros(4))
    batches.batch_size = 0
    with pytest.raises(ValueError, match="batch_size"):
        list(batches)


@pytest.mark.parametrize(
    "make",
    [
        lambda: LinkBatches(torch.tensor([[0, -1], [1, 2]]), num_nodes=6),
        lambda: RatingBatches(torch.tensor([[0, -1], [1, 2]]), torch.tensor([1.0, 2.0])),
    ],
)
def test_negative_edge_ids_are_refused(make):
    # Were accepted, then an IndexError from gather_rows at the first step.
    with pytest.raises(ValueError, match="edge_index holds a negative node id"):
        make()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_nodes=6.5), "num_nodes must be an int"),
        (dict(num_nodes=6, negatives=1.5), "negatives must be an int"),
        (dict(num_nodes=6, negatives=True), "negatives must be an int"),
    ],
)
def test_link_batch_counts_must_be_ints(kwargs, match):
    # Were accepted; the first iteration failed in torch (randint, repeat) with a TypeError.
    with pytest.raises(ValueError, match=match):
        LinkBatches(torch.tensor([[0, 1], [1, 2]]), **kwargs)


def test_ratings_may_be_a_list():
    # Was an AttributeError ('list' object has no attribute 'dim'), unlike NodeBatches.
    batches = RatingBatches(torch.tensor([[0, 1], [2, 3]]), [1, 5], shuffle=False)
    assert batches.level.tolist() == [0, 1]


@pytest.mark.parametrize(
    "ratings, levels, match",
    [
        ([1.0, 2.0], [[1, 2], [3, 4]], "levels must be"),  # was a RuntimeError in searchsorted
        ([1.0, 2.0], [1, 2, math.nan, 4], "levels must be"),  # was accepted
        ([math.nan, 2.0], None, "ratings contain NaN"),  # blamed a NaN level
    ],
)
def test_bad_levels_and_nan_ratings_are_named(ratings, levels, match):
    with pytest.raises(ValueError, match=match):
        RatingBatches(torch.tensor([[0, 1], [2, 3]]), torch.tensor(ratings), levels=levels)


def _graph(nodes, features=4, edge_index=None):
    if edge_index is None:
        edge_index = torch.tensor([list(range(nodes - 1)), list(range(1, nodes))])
    return SimpleNamespace(x=torch.randn(nodes, features), edge_index=edge_index)


@pytest.mark.parametrize(
    "graphs, match",
    [
        # An id past its graph silently became a node of the next graph in the batch.
        ([_graph(3, edge_index=torch.tensor([[0], [4]])), _graph(3)], r"graph 0: edge_index"),
        ([_graph(3), _graph(3, edge_index=torch.tensor([[0], [-1]]))], r"graph 1: edge_index"),
        # Were RuntimeErrors from torch.cat or an IndexError at the first batch.
        ([_graph(3), _graph(3, features=5)], "graph 1: x has 5 features"),
        ([_graph(3), SimpleNamespace(x=torch.randn(3), edge_index=_graph(3).edge_index)], "x must"),
        ([_graph(3), _graph(3, edge_index=torch.tensor([0, 1]))], "edge_index must be"),
        ([_graph(3), _graph(3, edge_index=torch.tensor([[0.0], [1.0]]))], "edge_index must be"),
        # An empty graph misaligned the pooled embeddings with y (a RuntimeError, or wrong rows).
        ([_graph(3), SimpleNamespace(x=torch.zeros(0, 4), edge_index=torch.zeros(2, 0))], "x must"),
    ],
)
def test_graph_lists_are_checked_when_built(graphs, match):
    with pytest.raises(ValueError, match=match):
        GraphBatches(graphs, torch.zeros(len(graphs)), batch_size=2)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(y=[1.0, 2.0, 3.0]), "y must be a tensor"),  # was an AttributeError
        (dict(y=torch.tensor(1.0)), "y must be a tensor"),  # was an IndexError
        # A mask was read as the positions 1, 0, 1.
        (dict(index=torch.tensor([True, False, True])), "index must be"),
        # Trained twice per epoch, against the documented "exactly one batch".
        (dict(index=torch.tensor([0, 0, 1])), "index holds a graph position twice"),
    ],
)
def test_graph_batch_targets_and_index_are_checked(kwargs, match):
    kwargs = {"y": torch.zeros(3), **kwargs}
    with pytest.raises(ValueError, match=match):
        GraphBatches([_graph(2), _graph(3), _graph(4)], **kwargs)


def test_graph_batches_of_one_batch_have_a_length():
    # batch_size=None (one batch, accepted by the check) was a TypeError in len().
    batches = GraphBatches([_graph(2), _graph(3)], torch.zeros(2), batch_size=None)
    assert len(batches) == 1 and len(list(batches)) == 1


@pytest.mark.parametrize("loss", [tv_loss, wasserstein_gap])
def test_adversary_losses_refuse_an_unknown_kind(loss):
    # tv_loss silently computed an MSE; wasserstein_gap raised an IndexError.
    with pytest.raises(ValueError, match="kind must be one of"):
        loss(torch.randn(4), torch.tensor([0, 1, 1, 0]), "bin")


@pytest.mark.parametrize(
    "batches, match",
    [
        (
            lambda: LinkBatches(torch.tensor([[0, 1], [1, N + 3]]), num_nodes=N + 4),
            f"node id {N + 3} but the graph has {N} nodes",
        ),
        (
            lambda: LinkBatches(torch.tensor([[0, 1], [1, 2]]), num_nodes=N + 4),
            f"past the graph's {N} nodes",
        ),
        (
            lambda: RatingBatches(torch.tensor([[0, 1], [1, N]]), torch.tensor([1.0, 2.0])),
            f"node id {N} but the graph has {N} nodes",
        ),
    ],
)
def test_link_and_rating_batches_past_the_graph_are_refused_at_fit(batches, match):
    # Failed in gather_rows with an IndexError at the first step (the negatives silently drew
    # nodes the graph lacks).
    with pytest.raises(ValueError, match=match):
        _fit(batches())


def test_an_epoch_where_every_pairing_walk_fails_warns():
    # Isolated nodes have no neighbour: the adversary saw no pair, and the record's pairs/a of
    # 0 was the only trace.
    graph = Graph.from_edge_index(torch.zeros(2, 0, dtype=torch.long), N)
    trainer = GALTrainer(
        _Linear(),
        NodeHead(nn.Linear(8, 2)),
        nn.Linear(8, 2),
        task_loss=classification_loss,
        lam=1.0,
        pairing="neighbor",
    )
    labels = torch.tensor([0, 1] * (N // 2))
    attribute = SensitiveAttribute("a", "categorical", labels)
    with pytest.warns(RuntimeWarning, match=f"all {N} pairing walks of attribute 'a' failed"):
        (record,) = trainer.fit(
            graph, NodeBatches(torch.arange(N), labels), attribute, epochs=1,
            x=torch.randn(N, 4), progress=False,
        )  # fmt: skip
    assert record["pairs/a"] == 0 and record["pair_failures/a"] == N


def test_a_sensitive_attribute_with_one_known_class_warns():
    # The adversary had nothing to separate: GAL hid nothing, without a word.
    edges = torch.tensor([list(range(N - 1)), list(range(1, N))])
    graph = Graph.from_edge_index(edges, N, symmetrize=True)
    trainer = GALTrainer(
        _Linear(), NodeHead(nn.Linear(8, 2)), nn.Linear(8, 2),
        task_loss=classification_loss, lam=1.0,
    )  # fmt: skip
    labels = torch.tensor([0, 1] * (N // 2))
    attribute = SensitiveAttribute("g", "binary", torch.ones(N, dtype=torch.long))
    with pytest.warns(RuntimeWarning, match=f"'g' has a single class among its {N} known"):
        trainer.fit(
            graph, NodeBatches(torch.arange(N), labels), attribute, epochs=1,
            x=torch.randn(N, 4), progress=False,
        )  # fmt: skip


def _graph_with_edge_features(edges):
    """A PyG-style graph whose edge_attr rows name their edge: (source, target, position)."""
    edge_index = torch.tensor(edges).t()
    attr = torch.cat([edge_index.t(), torch.arange(len(edges)).view(-1, 1)], 1).float()
    return SimpleNamespace(x=torch.randn(3, 2), edge_index=edge_index, edge_attr=attr)


def test_edge_features_of_a_graph_list_reach_the_encoder_in_csr_order():
    # Were dropped: an MPNN on PyG Data objects trained without its edge features.
    graphs = [
        _graph_with_edge_features([(2, 0), (1, 0), (0, 1), (1, 0)]),  # unsorted, one parallel
        _graph_with_edge_features([(0, 2), (2, 1)]),
    ]
    (batch,) = GraphBatches(graphs, torch.zeros(2), shuffle=False)
    local = batch.batch[batch.graph.row] * 3  # node offset of each edge's graph
    assert torch.equal(batch.edge_attr[:, 0], (batch.graph.col - local).float())
    assert torch.equal(batch.edge_attr[:, 1], (batch.graph.row - local).float())
    assert batch.graph.num_edges == 6  # the parallel edge kept: each has its own features
    assert sorted(batch.edge_attr[:4, 2].tolist()) == [0, 1, 2, 3]


def test_edge_features_on_some_graphs_only_are_refused():
    graphs = [SimpleNamespace(x=torch.randn(3, 2), edge_index=torch.tensor([[0], [1]]))]
    graphs.append(_graph_with_edge_features([(0, 1)]))
    with pytest.raises(ValueError, match="every graph or on none: graph 1 has one, graph 0"):
        GraphBatches(graphs, torch.zeros(2))
    graphs[0].edge_attr = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="graph 0: edge_attr must have one row per edge"):
        GraphBatches(graphs, torch.zeros(2))


class _PoolingEncoder(nn.Module):
    """One embedding per graph: a linear map of the mean of its nodes' features."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 8)

    def forward(self, x, graph, batch, edge_attr=None):
        sums = torch.zeros(int(batch.max()) + 1, x.size(1)).index_add(0, batch, x)
        return self.lin(sums / torch.bincount(batch).view(-1, 1))


@pytest.mark.parametrize(
    "attribute, match",
    [
        (SensitiveAttribute("g", "binary", torch.tensor([0, 1, 0, 1, 1])), "values has 5 rows"),
        (
            SensitiveAttribute("g", "binary", torch.tensor([0, 1]), index=torch.tensor([0, 7])),
            "index refers to node 7",
        ),
    ],
)
def test_a_graph_level_attribute_that_does_not_fit_the_graphs_is_refused(attribute, match):
    # Trained on: rows past the dataset were never read, and the adversary saw fewer graphs.
    graphs = [_graph_with_edge_features([(0, 1), (1, 2)]) for _ in range(4)]
    trainer = GALTrainer(
        _PoolingEncoder(), GraphHead(nn.Linear(8, 1)), nn.Linear(8, 1),
        task_loss=regression_loss, lam=1.0,
    )  # fmt: skip
    with pytest.raises(ValueError, match=match):
        trainer.fit(None, GraphBatches(graphs, torch.zeros(4)), attribute, epochs=1, progress=False)
