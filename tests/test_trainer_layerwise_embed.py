"""GALTrainer.embed layer by layer in chunks (for graphs too big for one pass) equals the
full-graph embedding: feature and learned-embedding encoders, several layer types, chunks that
do not divide the node count, hubs and isolated nodes; clear errors for encoders without the
layer-wise protocol."""

from __future__ import annotations

import pytest
import torch
from graphs import awkward_graphs
from torch import nn

from galfast import GALTrainer, Graph
from galfast.experiments.encoders import GNNStack
from galfast.models import EmbeddingEncoder
from galfast.nn import GATConv, GCNConv, SAGEConv
from galfast.train import NeighborSampling, NodeBatches, NodeHead, classification_loss


def _graph() -> Graph:
    edge_index, n = awkward_graphs()["hub"]
    extra = torch.randint(0, n, (2, 4000), generator=torch.Generator().manual_seed(0))
    return Graph.from_edge_index(torch.cat([edge_index, extra], 1), n + 5)  # 5 isolated


def _full(trainer, x, graph):
    trainer.encoder.eval()
    with torch.no_grad():
        return trainer.encoder(x, graph)


@pytest.mark.parametrize("chunk_size", [1000, 7 * 113])
def test_layerwise_embed_of_a_feature_encoder_equals_the_full_graph(chunk_size):
    graph = _graph()
    torch.manual_seed(0)
    x = torch.randn(graph.num_nodes, 5, dtype=torch.float64)
    encoder = GNNStack([GCNConv(5, 8), SAGEConv(8, 8), GATConv(8, 4, heads=2)]).double()
    trainer = GALTrainer(
        encoder,
        NodeHead(nn.Linear(8, 2)).double(),
        task_loss=classification_loss,
        lam=0.0,
        sampler=NeighborSampling([4, 3, 2], embed_chunk_size=chunk_size),
    )
    nodes = torch.arange(0, graph.num_nodes, 10)
    trainer.fit(graph, NodeBatches(nodes, nodes % 2), epochs=1, x=x, progress=False)
    torch.testing.assert_close(trainer.embed(), _full(trainer, x, graph))


def test_layerwise_embed_of_learned_embeddings_with_batch_norm():
    graph = _graph()
    torch.manual_seed(1)
    encoder = EmbeddingEncoder(graph.num_nodes, 6, [SAGEConv(6, 6), GCNConv(6, 4)]).double()
    trainer = GALTrainer(
        encoder, NodeHead(nn.Linear(4, 2)).double(), task_loss=classification_loss, lam=0.0
    )
    nodes = torch.arange(0, graph.num_nodes, 7)
    trainer.fit(graph, NodeBatches(nodes, nodes % 2), epochs=2, progress=False)
    ids = torch.arange(graph.num_nodes)
    torch.testing.assert_close(trainer.embed(chunk_size=500), _full(trainer, ids, graph))


def test_encoders_without_the_protocol():
    class Plain(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = GCNConv(3, 2)

        def forward(self, x, graph):
            return self.conv(x, graph)

    graph = _graph()
    x = torch.randn(graph.num_nodes, 3)
    trainer = GALTrainer(
        Plain(),
        NodeHead(nn.Linear(2, 2)),
        task_loss=classification_loss,
        lam=0.0,
        sampler=NeighborSampling([3]),
    )
    with pytest.raises(ValueError, match="input_rows"):
        trainer.embed(graph, x, chunk_size=100)
    # a sampled trainer whose encoder cannot run layer by layer embeds in one pass
    torch.testing.assert_close(trainer.embed(graph, x), _full(trainer, x, graph))
