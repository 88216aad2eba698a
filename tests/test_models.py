"""galfast.models: GC-MC rating decoder, dot-product decoder, attacker MLP, embedding encoder."""

import pytest
import torch
from torch import nn

from galfast import Graph
from galfast.models import (
    AttackerMLP,
    BilinearRatingDecoder,
    DotProductLinkDecoder,
    EmbeddingEncoder,
)
from galfast.ops import aggregate


def test_bilinear_decoder_matches_the_explicit_formula():
    torch.manual_seed(0)
    dec = BilinearRatingDecoder(4, num_levels=5, num_bases=2).double()
    u, v = torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    logits = dec(u, v)
    assert logits.shape == (3, 5)
    for r in range(5):
        q = sum(dec.coefficients[r, s] * dec.bases[s] for s in range(2))
        torch.testing.assert_close(logits[:, r], ((u @ q) * v).sum(1))
    probs = torch.softmax(logits, 1)
    torch.testing.assert_close(
        dec.expected_rating(logits), (probs * torch.arange(1, 6, dtype=torch.float64)).sum(1)
    )


def test_bilinear_decoder_gradients_and_custom_levels():
    dec = BilinearRatingDecoder(3, num_levels=3, num_bases=1, levels=[0.5, 1.0, 1.5]).double()
    u = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(dec, (u, v))
    big = torch.tensor([[0.0, 0.0, 50.0]], dtype=torch.float64)
    assert dec.expected_rating(big).item() == pytest.approx(1.5)
    with pytest.raises(ValueError, match="levels"):
        BilinearRatingDecoder(3, num_levels=3, levels=[1, 2])
    with pytest.raises(ValueError):
        BilinearRatingDecoder(3, num_levels=1)


def test_dot_product_decoder():
    z_src = torch.tensor([[1.0, 2.0], [0.0, 1.0]])
    z_dst = torch.tensor([[3.0, 4.0], [5.0, -1.0]])
    assert DotProductLinkDecoder()(z_src, z_dst).tolist() == [11.0, -1.0]


def test_attacker_mlp_layout():
    mlp = AttackerMLP(20, 2)  # the paper's 20-32-32-2 gender attacker
    linears = [m for m in mlp.modules() if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(20, 32), (32, 32), (32, 2)]
    acts = [m for m in mlp.modules() if isinstance(m, nn.LeakyReLU)]
    assert len(acts) == 2 and acts[0].negative_slope == 0.2
    assert mlp(torch.randn(7, 20)).shape == (7, 2)
    assert any(isinstance(m, nn.Dropout) for m in AttackerMLP(4, 1, dropout=0.5).modules())
    with pytest.raises(ValueError):
        AttackerMLP(4, 1, dropout=1.0)
    with pytest.raises(ValueError):
        AttackerMLP(4, 0)


class _MeanConv(nn.Module):
    def __init__(self, dim_in, dim_out):
        super().__init__()
        self.lin = nn.Linear(dim_in, dim_out)

    def forward(self, x, graph):
        return self.lin(aggregate(graph, x, reduce="mean"))


def test_embedding_encoder_stacks_layers_after_batch_norm():
    torch.manual_seed(0)
    graph = Graph.from_edge_index(torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]), 5, symmetrize=True)
    convs = [_MeanConv(4, 6), _MeanConv(6, 3)]
    enc = EmbeddingEncoder(5, 4, convs)
    ids = torch.arange(5)
    out = enc(ids, graph)
    assert out.shape == (5, 3)
    h = enc.norm(enc.embedding(ids))
    expected = convs[1](torch.relu(convs[0](h, graph)), graph)  # no activation after the last
    torch.testing.assert_close(out, expected)
    assert isinstance(EmbeddingEncoder(5, 4, batch_norm=False).norm, nn.Identity)
    with pytest.raises(ValueError, match="all 5 node ids"):
        enc(torch.arange(3), graph)
    assert EmbeddingEncoder(5, 4)(torch.arange(3), graph).shape == (3, 4)


def _max_norm_encoder(with_convs: bool):
    """(graph, convs, encoder): max_norm 1 over rows of norms from 0.1 to 7 times their own."""
    torch.manual_seed(0)
    graph = Graph.from_edge_index(torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]), 5, symmetrize=True)
    convs = [_MeanConv(4, 3)] if with_convs else []
    enc = EmbeddingEncoder(5, 4, convs, batch_norm=False, max_norm=1.0)
    with torch.no_grad():
        enc.embedding.weight.mul_(torch.tensor([[0.1], [3.0], [0.5], [7.0], [2.0]]))
    return graph, convs, enc


@pytest.mark.parametrize("with_convs", [True, False])
def test_embedding_encoder_max_norm_matches_nn_embedding(with_convs):
    graph, convs, enc = _max_norm_encoder(with_convs)
    reference = nn.Embedding(5, 4, max_norm=1.0)
    reference.weight.data.copy_(enc.embedding.weight)
    ids = torch.arange(5) if with_convs else torch.tensor([3, 1, 3])
    out = enc(ids, graph)
    looked_up = reference(ids)  # renormalises the looked-up rows of its table in place
    torch.testing.assert_close(enc.embedding.weight, reference.weight)
    expected = convs[0](looked_up, graph) if with_convs else looked_up
    torch.testing.assert_close(out, expected)
    norms = enc.embedding.weight.detach().norm(dim=1)
    assert norms[ids].max() <= 1.0 + 1e-6 and norms[1] == pytest.approx(1.0)
    if not with_convs:  # a row never looked up keeps its norm
        assert norms[4] > 1.5
    with pytest.raises(ValueError, match="max_norm must be > 0"):
        EmbeddingEncoder(5, 4, max_norm=0.0)


@pytest.mark.parametrize(
    "with_convs, ids",
    [(True, torch.arange(5)), (False, torch.arange(5)), (False, torch.tensor([3, 1, 3]))],
)
def test_embedding_encoder_max_norm_in_eval_mode_leaves_the_table(with_convs, ids):
    # An embed() of a sampled trainer rescaled rows its next steps would not have looked up,
    # so an evaluation between epochs changed the run.
    graph, convs, enc = _max_norm_encoder(with_convs)
    before = enc.embedding.weight.detach().clone()
    training = enc(ids, graph)  # in place, as nn.Embedding
    enc.embedding.weight.data.copy_(before)
    enc.eval()
    evaluated = enc(ids, graph)
    assert torch.equal(enc.embedding.weight, before)
    torch.testing.assert_close(evaluated, training)


def test_embedding_encoder_with_a_pyg_layer():
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    from galfast.nn import EdgeIndexAdapter

    graph = Graph.from_edge_index(torch.tensor([[0, 1], [1, 2]]), 3, symmetrize=True)
    conv = pyg_nn.GCNConv(4, 2)
    enc = EmbeddingEncoder(3, 4, [EdgeIndexAdapter(conv)])
    out = enc(torch.arange(3), graph)
    h = enc.norm(enc.embedding(torch.arange(3)))
    torch.testing.assert_close(out, conv(h, graph.edge_index()))
