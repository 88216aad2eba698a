"""Inputs users pass to the task side of the trainer (task heads and losses, 1-N knowledge-graph
batches, neighbour sampling and its custom batches, layer-wise embedding, captured steps):
each mistake is a ValueError naming it, never a deep torch error, a NaN or a silently wrong
result; legitimate inputs of other integer types (NumPy's) are accepted."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from gal_fixtures import planted_graph
from torch import nn

from galfast import GALTrainer, Graph, SensitiveAttribute
from galfast.experiments.encoders import GNNStack
from galfast.models import (
    DistMultDecoder,
    DotProductLinkDecoder,
    KGLinkPredictor,
    kg_queries,
)
from galfast.nn import SAGEConv
from galfast.train import (
    EdgeHead,
    NeighborSampling,
    NodeBatches,
    NodeHead,
    OneToNBatches,
    OneToNHead,
    OneToNLoss,
    classification_loss,
    link_loss,
    rating_mse,
    regression_loss,
)
from galfast.train.layerwise import layerwise_embed
from galfast.train.step_graphs import StepGraphs

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def planted():
    return planted_graph(num_nodes=120, seed=3)


class _Batch:
    """A plain batch object with whatever fields a test sets."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


# ---------------------------------------------------------------- task losses
@pytest.mark.parametrize(
    "loss, pred, fields, match",
    [
        # [B, 2] outputs for [B] targets: "shape '[3]' is invalid for input of size 6"
        (regression_loss, torch.zeros(3, 2), dict(y=torch.zeros(3)), r"batch\.y of shape \[3\]"),
        # one prediction broadcast over every rating, with only a UserWarning
        (rating_mse, torch.zeros(1), dict(rating=torch.ones(3)), r"batch\.rating of shape \[3\]"),
        (link_loss, torch.zeros(6), dict(label=torch.ones(3)), r"batch\.label of shape \[3\]"),
        # "Expected target size [1, 4], got [1, 3]" from the transposed softmax
        (
            classification_loss,
            torch.zeros(4, 3),
            dict(y=torch.tensor([0, 1, 2])),
            r"batch\.y has 3 rows for 4 rows of scores",
        ),
    ],
)
def test_a_prediction_per_target_is_checked_by_shape(loss, pred, fields, match):
    with pytest.raises(ValueError, match=match):
        loss(pred, _Batch(**fields))


@pytest.mark.parametrize(
    "loss, pred, fields, match",
    [
        (regression_loss, torch.zeros(0, 1), dict(y=torch.zeros(0)), r"batch\.y is empty"),
        (rating_mse, torch.zeros(0), dict(rating=torch.zeros(0)), r"batch\.rating is empty"),
        (link_loss, torch.zeros(0), dict(label=torch.zeros(0)), r"batch\.label is empty"),
        (
            classification_loss,
            torch.zeros(0, 3),
            dict(y=torch.zeros(0, dtype=torch.long)),
            r"batch\.y is empty",
        ),
    ],
)
def test_an_empty_batch_is_refused_rather_than_a_nan_loss(loss, pred, fields, match):
    with pytest.raises(ValueError, match=match):
        loss(pred, _Batch(**fields))


@pytest.mark.parametrize(
    "loss, pred, fields, match",
    [
        (regression_loss, torch.zeros(3), dict(y=[0.0, 1.0, 2.0]), r"batch\.y must be a tensor"),
        (classification_loss, torch.zeros(3, 3), dict(y=[0, 1, 2]), r"batch\.y must be a tensor"),
    ],
)
def test_targets_that_are_not_tensors_are_named(loss, pred, fields, match):
    with pytest.raises(ValueError, match=match):
        loss(pred, _Batch(**fields))


def test_matching_targets_still_give_torchs_losses():
    pred = torch.tensor([[0.5], [1.5], [-1.0]])
    y = torch.tensor([1.0, 1.0, 0.0])
    torch.testing.assert_close(
        regression_loss(pred, _Batch(y=y)), nn.functional.mse_loss(pred[:, 0], y)
    )
    torch.testing.assert_close(
        rating_mse(pred, _Batch(rating=y)), nn.functional.mse_loss(pred[:, 0], y)
    )
    expected = nn.functional.binary_cross_entropy_with_logits(pred[:, 0], y)
    torch.testing.assert_close(link_loss(pred, _Batch(label=y)), expected)


# ---------------------------------------------------------------- task heads
def test_node_head_refuses_negative_ids_instead_of_reading_the_last_rows():
    z = torch.randn(10, 4)
    head = NodeHead(nn.Identity())
    with pytest.raises(ValueError, match=r"batch\.nodes holds a node id outside \[0, 10\)"):
        head(z, _Batch(nodes=torch.tensor([0, -1])))
    with pytest.raises(ValueError, match=r"batch\.nodes holds a node id outside \[0, 10\)"):
        head(z, _Batch(nodes=torch.tensor([0, 10])))


def test_node_head_names_float_ids_and_reads_small_integer_ids_as_ids():
    z = torch.randn(10, 4)
    head = NodeHead(nn.Identity())
    with pytest.raises(
        ValueError, match=r"batch\.nodes must hold integer node ids, got torch\.float32"
    ):
        head(z, _Batch(nodes=torch.tensor([0.0, 1.0])))
    # uint8 ids were read as a mask ("The shape of the mask [2] ... does not match")
    ids = torch.tensor([3, 1], dtype=torch.uint8)
    torch.testing.assert_close(head(z, _Batch(nodes=ids)), z[[3, 1]])
    mask = torch.arange(10) % 3 == 0  # a boolean mask still selects rows
    torch.testing.assert_close(head(z, _Batch(nodes=mask)), z[mask])


def test_edge_head_names_its_id_fields():
    z = torch.randn(10, 4)
    head = EdgeHead(DotProductLinkDecoder())
    with pytest.raises(ValueError, match=r"batch\.dst holds a node id outside \[0, 10\)"):
        head(z, _Batch(src=torch.tensor([0, 1]), dst=torch.tensor([1, -3])))
    with pytest.raises(ValueError, match=r"batch\.src must hold integer node ids"):
        head(z, _Batch(src=torch.tensor([0.0, 1.0]), dst=torch.tensor([1, 2])))


# ---------------------------------------------------------------- knowledge graphs
N_KG = 8
RING = torch.tensor([(i, 0, (i + 1) % N_KG) for i in range(N_KG)])


def test_one_to_n_batches_take_a_bool_shuffle():
    queries = kg_queries(RING, N_KG, 1)
    with pytest.raises(ValueError, match="shuffle must be a bool, got str"):
        OneToNBatches(queries, 4, shuffle="no")  # read as True: shuffled


class _EntityEncoder(nn.Module):
    """A learned embedding per entity with fixed relation embeddings (what OneToNHead needs)."""

    def __init__(self, n: int, relations: int, dim: int = 4):
        super().__init__()
        self.entity = nn.Parameter(torch.randn(n, dim))
        self.relation = nn.Parameter(torch.randn(2 * relations, dim))

    def forward(self, x, graph):
        return self.entity[x]

    def relations(self):
        return self.relation

    def embed(self):
        return self.entity, self.relation


def test_queries_over_other_entities_than_the_graphs_nodes_are_refused_at_fit():
    torch.manual_seed(0)
    graph = Graph.from_edge_index(RING[:, [0, 2]].t(), N_KG + 4)
    encoder = _EntityEncoder(N_KG + 4, 1)
    model = KGLinkPredictor(encoder, DistMultDecoder(N_KG + 4, 4))
    trainer = GALTrainer(encoder, OneToNHead(model), task_loss=OneToNLoss(0.1), lam=0.0)
    batches = OneToNBatches(kg_queries(RING, N_KG, 1), 4, seed=0)
    # was: "logits and targets must both be [B, N], got [4, 12] and [4, 8]" at the first step
    with pytest.raises(ValueError, match="queries over 8 entities but the graph has 12 nodes"):
        trainer.fit(graph, batches, epochs=1, progress=False)


# ---------------------------------------------------------------- neighbour sampling
def test_neighbor_sampling_accepts_numpy_and_tensor_counts():
    sampling = NeighborSampling(
        [np.int64(3), 2], weighted=np.bool_(True), embed_chunk_size=np.int64(50)
    )
    assert sampling.fanouts == (3, 2) and all(type(f) is int for f in sampling.fanouts)
    assert sampling.weighted is True and type(sampling.embed_chunk_size) is int
    assert NeighborSampling(np.array([4, -1])).fanouts == (4, -1)
    assert NeighborSampling(torch.tensor([5])).fanouts == (5,)
    assert sampling.to_checkpoint() == {"fanouts": [3, 2], "weighted": True}


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(fanouts=[3.0]), r"fanouts\[0\] must be an int, got float"),
        (dict(fanouts=np.array([1.5])), r"fanouts\[0\] must be an int, got float"),
        (dict(fanouts=[True]), r"fanouts\[0\] must be an int, got bool"),
        (dict(fanouts=np.zeros((1, 2), dtype=np.int64)), "fanouts must be a sequence of ints"),
        (dict(fanouts=[3], weighted=1), "weighted must be a bool, got int"),
        (dict(fanouts=[3], embed_chunk_size=2.0), "embed_chunk_size must be an int >= 1"),
    ],
)
def test_neighbor_sampling_still_refuses_what_is_not_a_count(kwargs, match):
    with pytest.raises(ValueError, match=match):
        NeighborSampling(**kwargs)


@dataclasses.dataclass(frozen=True)
class _MyBatch:
    nodes: object
    y: torch.Tensor

    def to(self, device):
        return self


class _Once:
    def __init__(self, *batches):
        self.batches = batches

    def __iter__(self):
        return iter(self.batches)

    def __len__(self):
        return len(self.batches)


def _sampled_fit(planted, batch, **options):
    torch.manual_seed(0)
    encoder = GNNStack([SAGEConv(planted.x.size(1), 8), SAGEConv(8, 4)])
    trainer = GALTrainer(
        encoder,
        NodeHead(nn.Linear(4, 2)),
        nn.Linear(4, 2),  # the attacker
        task_loss=classification_loss,
        sampler=NeighborSampling([3, 3]),
        **options,
    )
    attr = SensitiveAttribute("a", "binary", planted.a)
    history = trainer.fit(planted.graph, _Once(batch), attr, epochs=1, x=planted.x, progress=False)
    return history.to_list()[-1]


@pytest.mark.parametrize("adv_update", ["separate", "joint"])
def test_an_empty_custom_batch_is_refused_rather_than_a_task_loss_of_0(planted, adv_update):
    batch = _MyBatch(torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long))
    with pytest.raises(ValueError, match=r"_MyBatch\.nodes holds no node ids"):
        _sampled_fit(planted, batch, adv_update=adv_update)


@pytest.mark.parametrize(
    "nodes, match",
    [
        ([0, 1, 2], r"_MyBatch\.nodes must be a tensor of node ids, got list"),
        (None, r"_MyBatch\.nodes must be a tensor of node ids, got NoneType"),
        (torch.tensor(3), r"_MyBatch\.nodes must have one row per item, got a 0-d tensor"),
        (
            torch.tensor([0.0, 1.0, 2.0]),
            r"_MyBatch\.nodes must hold integer node ids, got torch.float32",
        ),
        (
            torch.tensor([True, False, True]),
            r"_MyBatch\.nodes must hold integer node ids, got torch.bool",
        ),
    ],
)
def test_custom_batch_node_fields_are_named(planted, nodes, match):
    with pytest.raises(ValueError, match=match):
        _sampled_fit(planted, _MyBatch(nodes, torch.tensor([0, 1, 0])))


def test_custom_batches_with_small_integer_ids_train_like_int64_ones(planted):
    nodes, y = planted.train[:10], planted.y[planted.train[:10]]
    small = _sampled_fit(planted, _MyBatch(nodes.to(torch.uint8), y))
    wide = _sampled_fit(planted, _MyBatch(nodes, y))
    assert small["task_loss"] == pytest.approx(wide["task_loss"], rel=1e-6)


# ---------------------------------------------------------------- layer-wise embedding
def _encoder_and_graph(planted):
    torch.manual_seed(0)
    return GNNStack([SAGEConv(planted.x.size(1), 8), SAGEConv(8, 4)]).eval(), planted.graph


@pytest.mark.parametrize(
    "chunk_size, match",
    [
        (-5, r"chunk_size must be an int >= 1, got -5"),  # returned uninitialised rows
        (0, r"chunk_size must be an int >= 1, got 0"),
        (2.5, r"chunk_size must be an int >= 1, got 2.5"),
        (True, r"chunk_size must be an int >= 1, got True"),
        (None, r"chunk_size must be an int >= 1, got None"),
    ],
)
def test_layerwise_chunk_sizes_are_checked(planted, chunk_size, match):
    encoder, graph = _encoder_and_graph(planted)
    with pytest.raises(ValueError, match=match):
        layerwise_embed(encoder, graph, planted.x, chunk_size)


def test_layerwise_takes_numpy_chunk_sizes(planted):
    encoder, graph = _encoder_and_graph(planted)
    with torch.no_grad():
        full = encoder(planted.x, graph)
    torch.testing.assert_close(layerwise_embed(encoder, graph, planted.x, np.int64(50)), full)


def test_layerwise_checks_the_graph_the_inputs_and_the_layer_count(planted):
    encoder, graph = _encoder_and_graph(planted)
    with pytest.raises(ValueError, match="graph must be a galfast.Graph, got str"):
        layerwise_embed(encoder, "graph", planted.x, 50)
    with pytest.raises(
        ValueError, match=r"inputs must have one row per node \(120\), got \[50, 6\]"
    ):
        layerwise_embed(encoder, graph, planted.x[:50], 50)

    class Broken(GNNStack):
        num_layers = -1  # returned None

    broken = Broken([SAGEConv(planted.x.size(1), 4)])
    with pytest.raises(ValueError, match=r"encoder\.num_layers must be an int >= 0, got -1"):
        layerwise_embed(broken, graph, planted.x, 50)


# ---------------------------------------------------------------- captured steps
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(warmup=-1), "warmup must be >= 0"),  # captured with no warm-up run
        (dict(warmup="2"), "warmup must be an int"),
        (dict(max_graphs=1.5), "max_graphs must be an int"),
    ],
)
def test_step_graph_settings_are_checked(kwargs, match):
    with pytest.raises(ValueError, match=match):
        StepGraphs(torch.device("cpu"), **kwargs)


def test_node_batches_of_full_graph_training_still_train(planted):
    """The heads' id checks leave ordinary training as it was."""
    torch.manual_seed(0)
    encoder = GNNStack([SAGEConv(planted.x.size(1), 4)])
    trainer = GALTrainer(encoder, NodeHead(nn.Linear(4, 2)), task_loss=classification_loss, lam=0.0)
    batches = NodeBatches(planted.train, planted.y[planted.train], batch_size=40)
    history = trainer.fit(planted.graph, batches, epochs=1, x=planted.x, progress=False)
    assert history.to_list()[-1]["task_steps"] == len(batches)
