"""GALTrainer on neighbour-sampled mini-batches (sampler=NeighborSampling): with fan-outs that
take every in-neighbour it takes exactly the full-graph trainer's steps (every pairing, both
adversary updates, node and link batches); it trains only on sampled computation graphs; bad
settings raise clear errors."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from gal_fixtures import planted_graph
from torch import nn

from galfast import GALTrainer, Graph, SensitiveAttribute
from galfast.experiments.encoders import GNNStack
from galfast.models import AttackerMLP, DotProductLinkDecoder, EmbeddingEncoder
from galfast.nn import GATConv, GCNConv, SAGEConv
from galfast.train import (
    EdgeHead,
    LinkBatches,
    NeighborSampling,
    NodeBatches,
    NodeHead,
    RatingBatches,
    classification_loss,
    link_loss,
    rating_mse,
)

# Tiny tensors: one thread avoids oversubscribing shared 2-core machines.
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def planted():
    return planted_graph(num_nodes=120, seed=3)


def _modules(width: int, conv: str):
    torch.manual_seed(0)
    make = {
        "gcn": GCNConv,
        "sage": SAGEConv,
        "gat": lambda a, b: GATConv(a, b, heads=2, concat=False),
    }[conv]
    encoder = GNNStack([make(width, 12), make(12, 6)]).double()
    return encoder, NodeHead(nn.Linear(6, 2)).double(), AttackerMLP(6, 2).double()


def _pair(planted, conv="gcn", **options):
    """A full-graph trainer and a sampled one (fan-outs -1) built from the same modules."""
    encoder, head, attacker = _modules(planted.x.size(1), conv)
    kwargs = dict(task_loss=classification_loss, lam=2.0, adv_batch_size=25, seed=7, **options)
    full = GALTrainer(encoder, head, attacker, **kwargs)
    copies = [copy.deepcopy(m) for m in (encoder, head, attacker)]
    sampled = GALTrainer(*copies, sampler=NeighborSampling([-1, -1]), **kwargs)
    return full, sampled


def _state(trainer):
    return {
        **{f"encoder.{k}": v for k, v in trainer.encoder.state_dict().items()},
        **{f"head.{k}": v for k, v in trainer.task_head.state_dict().items()},
        **{f"attacker.{k}": v for k, v in trainer.attacker.state_dict().items()},
    }


def _assert_same_run(full, sampled):
    for key, value in _state(full).items():
        torch.testing.assert_close(_state(sampled)[key], value, rtol=1e-9, atol=1e-11, msg=key)
    for mine, theirs in zip(sampled.history.to_list(), full.history.to_list()):
        for key, value in theirs.items():
            if isinstance(value, float) and key != "seconds":
                assert mine[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
            elif key != "seconds":
                assert mine[key] == value, key


@pytest.mark.parametrize("pairing", ["node", "neighbor", "nhop:2"])
@pytest.mark.parametrize("adv_update", ["separate", "joint"])
def test_full_fanout_sampling_takes_the_full_graph_trainers_steps(planted, pairing, adv_update):
    full, sampled = _pair(planted, pairing=pairing, adv_update=adv_update)
    attr = SensitiveAttribute("a", "binary", planted.a)
    x = planted.x.double()
    for trainer in (full, sampled):
        batches = NodeBatches(planted.train, planted.y[planted.train], batch_size=32)
        trainer.fit(planted.graph, batches, attr, epochs=3, x=x, progress=False)
    _assert_same_run(full, sampled)


@pytest.mark.parametrize("conv", ["sage", "gat"])
def test_other_layers_and_the_instead_schedule(planted, conv):
    full, sampled = _pair(planted, conv=conv, adv_every=2, adv_schedule="instead")
    attr = SensitiveAttribute("a", "binary", planted.a[planted.train], index=planted.train)
    for trainer in (full, sampled):
        batches = NodeBatches(planted.train, planted.y[planted.train], batch_size=50)
        trainer.fit(planted.graph, batches, attr, epochs=2, x=planted.x.double(), progress=False)
    _assert_same_run(full, sampled)


def test_link_batches_read_src_and_dst_rows(planted):
    torch.manual_seed(0)
    encoder = GNNStack([GCNConv(planted.x.size(1), 8), GCNConv(8, 8)]).double()
    head = EdgeHead(DotProductLinkDecoder())
    kwargs = dict(task_loss=link_loss, lam=0.0, seed=1)
    full = GALTrainer(encoder, head, **kwargs)
    sampled = GALTrainer(copy.deepcopy(encoder), head, sampler=NeighborSampling([-1, -1]), **kwargs)
    edges = torch.stack([planted.graph.col, planted.graph.row])
    for trainer in (full, sampled):
        batches = LinkBatches(edges, planted.graph.num_nodes, batch_size=64)
        trainer.fit(planted.graph, batches, epochs=2, x=planted.x.double(), progress=False)
    for mine, theirs in zip(sampled.encoder.parameters(), full.encoder.parameters()):
        torch.testing.assert_close(mine, theirs, rtol=1e-9, atol=1e-11)


def test_a_sampled_step_encodes_only_the_batchs_computation_graph(planted):
    """The encoder sees the outermost block's nodes, never the whole graph."""
    seen = []

    class Recording(GNNStack):
        def forward(self, x, graph):
            seen.append(x.size(0))
            return super().forward(x, graph)

    torch.manual_seed(0)
    encoder = Recording([SAGEConv(planted.x.size(1), 8), SAGEConv(8, 8)])
    trainer = GALTrainer(
        encoder,
        NodeHead(nn.Linear(8, 2)),
        AttackerMLP(8, 2),
        task_loss=classification_loss,
        adv_batch_size=4,
        sampler=NeighborSampling([2, 1]),
    )
    attr = SensitiveAttribute("a", "binary", planted.a)
    batches = NodeBatches(planted.train, planted.y[planted.train], batch_size=4)
    trainer.fit(planted.graph, batches, attr, epochs=1, x=planted.x, progress=False)
    # 4 seeds, at most 2 neighbours each, then at most 1 for each of those 12 nodes
    assert seen and max(seen) <= 4 + 4 * 2 + 12 * 1 < planted.graph.num_nodes


def test_bad_settings_raise_clear_errors(planted):
    encoder, head, attacker = _modules(planted.x.size(1), "gcn")
    with pytest.raises(ValueError, match="NeighborSampling"):
        GALTrainer(encoder, head, attacker, task_loss=classification_loss, sampler=[15, 10])
    with pytest.raises(ValueError, match=r"fanouts\[1\]"):
        NeighborSampling([15, -2])
    with pytest.raises(ValueError, match="embed_chunk_size"):
        NeighborSampling([15], embed_chunk_size=0)
    trainer = GALTrainer(
        encoder, head, attacker, task_loss=classification_loss, sampler=NeighborSampling([3])
    )
    attr = SensitiveAttribute("a", "binary", planted.a)
    batches = NodeBatches(planted.train, planted.y[planted.train])
    with pytest.raises(ValueError, match="1 sampled blocks"):
        trainer.fit(planted.graph, batches, attr, epochs=1, x=planted.x.double(), progress=False)
    with pytest.raises(ValueError, match="needs the graph"):
        trainer.fit(None, batches, attr, epochs=1, progress=False)
    with pytest.raises(ValueError, match="weighted=True"):
        weighted = GALTrainer(
            encoder,
            head,
            attacker,
            task_loss=classification_loss,
            sampler=NeighborSampling([3, 3], weighted=True),
        )
        weighted.fit(planted.graph, batches, attr, epochs=1, x=planted.x.double(), progress=False)


def test_learned_embeddings_and_rating_batches(planted):
    """Node ids as encoder inputs (EmbeddingEncoder) and RatingBatch's src and dst."""
    torch.manual_seed(0)
    n = planted.graph.num_nodes
    encoder = EmbeddingEncoder(n, 6, [GCNConv(6, 6), SAGEConv(6, 4)], batch_norm=False).double()
    head = EdgeHead(DotProductLinkDecoder())
    kwargs = dict(task_loss=rating_mse, lam=1.0, adv_batch_size=30, seed=2)
    attacker = AttackerMLP(4, 2).double()
    full = GALTrainer(encoder, head, attacker, **kwargs)
    copies = (copy.deepcopy(encoder), head, copy.deepcopy(attacker))
    sampled = GALTrainer(*copies, sampler=NeighborSampling([-1, -1]), **kwargs)
    edges = torch.stack([planted.graph.col, planted.graph.row])
    ratings = (edges.sum(0) % 5 + 1).double()
    attr = SensitiveAttribute("a", "binary", planted.a)
    for trainer in (full, sampled):
        batches = RatingBatches(edges, ratings, batch_size=100)
        trainer.fit(planted.graph, batches, attr, epochs=2, progress=False)
    _assert_same_run(full, sampled)


def test_a_batch_of_one_isolated_node_trains_through_the_encoders_batch_norm():
    """A sampled batch of one node without neighbours gives EmbeddingEncoder's BatchNorm a
    single row (no batch variance): it is normalised by the running statistics, which that
    step leaves alone, instead of failing the epoch with torch's "Expected more than 1 value
    per channel when training"."""
    ring = torch.arange(9)
    edges = torch.stack([ring, (ring + 1) % 9])
    graph = Graph.from_edge_index(torch.cat([edges, edges.flip(0)], 1), num_nodes=10)  # 9 alone
    torch.manual_seed(0)
    encoder = EmbeddingEncoder(10, 4, [GCNConv(4, 4)])
    trainer = GALTrainer(
        encoder,
        NodeHead(nn.Linear(4, 2)),
        task_loss=classification_loss,
        lam=0.0,
        sampler=NeighborSampling([2]),
    )
    nodes = torch.tensor([0, 1, 9])  # batches [0, 1] and [9]
    running = encoder.norm.module.running_mean
    seen = []
    encoder.norm.register_forward_hook(lambda m, args, out: seen.append(running.clone()))
    history = trainer.fit(graph, NodeBatches(nodes, nodes % 2, 2, shuffle=False), epochs=1)
    assert history.to_list()[-1]["task_steps"] == 2
    assert math.isfinite(history.to_list()[-1]["task_loss"])
    assert torch.equal(running, seen[-1])  # the lone row's step kept the running mean
    assert not torch.equal(seen[0], torch.zeros(4))  # the batch before it updated it


def test_an_embed_between_fits_leaves_a_max_norm_run_as_it_was(planted):
    # embed() rescaled every row of a max_norm table in place; the sampled steps after it
    # then read rows they would not have rescaled themselves (a parameter 0.0025 off).
    def trainer():
        torch.manual_seed(0)
        n = planted.graph.num_nodes
        encoder = EmbeddingEncoder(n, 6, [SAGEConv(6, 4)], batch_norm=False, max_norm=0.5)
        return GALTrainer(
            encoder.double(),
            NodeHead(nn.Linear(4, 2)).double(),
            AttackerMLP(4, 2).double(),
            task_loss=classification_loss,
            lam=1.0,
            adv_batch_size=25,
            seed=7,
            sampler=NeighborSampling([2]),
        )

    attr = SensitiveAttribute("a", "binary", planted.a)

    def fit(t, epochs):
        batches = NodeBatches(planted.train, planted.y[planted.train], batch_size=20)
        t.fit(planted.graph, batches, attr, epochs=epochs, progress=False)

    straight, evaluated = trainer(), trainer()
    fit(straight, 2)
    fit(evaluated, 1)
    evaluated.embed()
    fit(evaluated, 2)
    for key, value in _state(straight).items():
        assert torch.equal(_state(evaluated)[key], value), key
