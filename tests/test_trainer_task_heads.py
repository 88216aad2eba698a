"""Task heads and losses, and the paper's two edge-task pipelines in miniature."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from galfast import GALTrainer, Graph, SensitiveAttribute
from galfast.models import (
    AttackerMLP,
    BilinearRatingDecoder,
    DotProductLinkDecoder,
    EmbeddingEncoder,
)
from galfast.ops import aggregate
from galfast.train import (
    EdgeHead,
    GraphHead,
    LinkBatch,
    LinkBatches,
    NodeBatch,
    NodeHead,
    RatingBatch,
    RatingBatches,
    classification_loss,
    link_loss,
    rating_cross_entropy,
    rating_mse,
    regression_loss,
)

# Tiny tensors: one thread avoids oversubscribing shared 2-core machines.
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_heads_index_the_embeddings():
    z = torch.arange(12.0).view(6, 2)
    assert torch.equal(NodeHead(nn.Identity())(z, NodeBatch(torch.tensor([4, 1]), None)), z[[4, 1]])
    batch = LinkBatch(torch.tensor([0, 5]), torch.tensor([1, 2]), torch.ones(2))
    assert EdgeHead(DotProductLinkDecoder())(z, batch).tolist() == [
        3.0,
        95.0,
    ]  # [0, 1].[2, 3], [10, 11].[4, 5]
    assert torch.equal(GraphHead(nn.Identity())(z, None), z)


def test_losses_match_torch():
    torch.manual_seed(0)
    scores, y = torch.randn(4, 3), torch.tensor([0, 2, 1, 1])
    assert torch.equal(classification_loss(scores, NodeBatch(None, y)), F.cross_entropy(scores, y))
    values = torch.randn(4, 1)
    target = torch.randn(4, 1)
    assert torch.equal(regression_loss(values, NodeBatch(None, target)), F.mse_loss(values, target))
    logits, label = torch.randn(4), torch.tensor([1.0, 0.0, 1.0, 0.0])
    assert torch.equal(
        link_loss(logits, LinkBatch(None, None, label)),
        F.binary_cross_entropy_with_logits(logits, label),
    )
    rated = RatingBatch(None, None, torch.tensor([4, 0, 2, 1]), torch.tensor([5.0, 1.0, 3.0, 2.0]))
    five = torch.randn(4, 5)
    assert torch.equal(rating_cross_entropy(five, rated), F.cross_entropy(five, rated.level))
    assert torch.equal(rating_mse(values, rated), F.mse_loss(values.view(-1), rated.rating))


class _MeanConv(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lin = nn.Linear(dim, dim)

    def forward(self, x, graph):
        return self.lin(aggregate(graph, x, norm="gcn"))


def test_movielens_pipeline_in_miniature():
    # Learned embeddings + BatchNorm + a GNN layer, the GC-MC decoder over 5 rating levels,
    # a 2-output attacker on users only, 32-user adversary batches after every task step.
    gen = torch.Generator().manual_seed(0)
    users, movies = 40, 30
    src = torch.randint(users, (400,), generator=gen)
    dst = users + torch.randint(movies, (400,), generator=gen)
    pairs = torch.unique(torch.stack([src, dst]), dim=1)
    ratings = torch.randint(1, 6, (pairs.size(1),), generator=gen)
    graph = Graph.from_edge_index(pairs, users + movies, symmetrize=True)
    gender = SensitiveAttribute(
        "gender", "binary", torch.randint(2, (users,), generator=gen), index=torch.arange(users)
    )
    torch.manual_seed(0)
    encoder = EmbeddingEncoder(users + movies, 8, [_MeanConv(8)])
    decoder = BilinearRatingDecoder(8)
    trainer = GALTrainer(
        encoder,
        EdgeHead(decoder),
        AttackerMLP(8, 2),
        task_loss=rating_cross_entropy,
        lam=0.5,
        adv_batch_size=32,
    )
    history = trainer.fit(
        graph, RatingBatches(pairs, ratings, batch_size=128), gender, epochs=3, progress=False
    )
    assert history[-1]["task_steps"] == history[-1]["adv_steps"] == -(-pairs.size(1) // 128)
    assert history[-1]["pairs/gender"] == 32 * history[-1]["adv_steps"]
    assert history[-1]["task_loss"] < history[0]["task_loss"]
    z = trainer.embed()
    predicted = decoder.expected_rating(decoder(z[pairs[0]], z[pairs[1]]))
    assert predicted.shape == ratings.shape and bool(((predicted >= 1) & (predicted <= 5)).all())


def test_link_prediction_pipeline_in_miniature():
    gen = torch.Generator().manual_seed(1)
    edges = torch.randint(50, (2, 150), generator=gen)
    graph = Graph.from_edge_index(edges, 50, symmetrize=True)
    x = torch.randn(50, 6, generator=gen)
    label = SensitiveAttribute("class", "categorical", torch.randint(3, (50,), generator=gen))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(6, 8)

        def forward(self, x, graph):
            return aggregate(graph, self.lin(x), norm="gcn")

    trainer = GALTrainer(
        Encoder(),
        EdgeHead(DotProductLinkDecoder()),
        AttackerMLP(8, 3),
        task_loss=link_loss,
        distance="wasserstein",
        lam=1.0,
    )
    history = trainer.fit(
        graph, LinkBatches(edges, 50, negatives=2), label, epochs=3, x=x, progress=False
    )
    assert history[-1]["adv_steps"] == 1 and "adv_loss/class" in history[-1]


def _rating_trainer(num_levels: int = 5) -> GALTrainer:
    encoder = EmbeddingEncoder(10, 4, [_MeanConv(4)])
    head = EdgeHead(BilinearRatingDecoder(4, num_levels=num_levels))
    return GALTrainer(encoder, head, AttackerMLP(4, 2), task_loss=rating_cross_entropy, lam=0.0)


def test_ratings_missing_a_star_must_name_the_decoders_levels():
    # Without star 2, the default levels were 1, 3, 4, 5: a 3 became level 1, which the
    # 5-level decoder read as 2 stars, and the run trained on shifted targets silently.
    pairs = torch.tensor([[0, 1, 2, 3], [5, 6, 7, 8]])
    graph = Graph.from_edge_index(pairs, 10, symmetrize=True)
    stars = torch.tensor([1, 3, 4, 5])
    with pytest.raises(ValueError, match=r"scores the levels \[1.0, 2.0, 3.0, 4.0, 5.0\] but"):
        _rating_trainer().fit(graph, RatingBatches(pairs, stars), epochs=1, progress=False)
    batches = RatingBatches(pairs, stars, levels=range(1, 6))
    history = _rating_trainer().fit(graph, batches, epochs=1, progress=False)
    assert history[-1]["task_steps"] == 1


def test_a_decoder_of_other_level_count_is_refused():
    pairs = torch.tensor([[0, 1], [5, 6]])
    graph = Graph.from_edge_index(pairs, 10, symmetrize=True)
    batches = RatingBatches(pairs, torch.tensor([1, 2]), levels=range(1, 6))
    with pytest.raises(ValueError, match="levels=\\[1.0, 2.0, 3.0\\] to RatingBatches"):
        _rating_trainer(num_levels=3).fit(graph, batches, epochs=1, progress=False)
