"""CompGCNEncoder and KGLinkPredictor: shapes, gradients, input checks, and a small knowledge
graph whose triples the model learns to rank first."""

from __future__ import annotations

import pytest
import torch

from galfast.models import (
    CompGCNEncoder,
    ConvEDecoder,
    DistMultDecoder,
    KGLinkPredictor,
    evaluate_link_prediction,
    kg_queries,
    one_to_n_loss,
)
from galfast.nn import compgcn_graphs
from galfast.train import OneToNBatches, OneToNHead, OneToNLoss

N = 16
# Two rings of 8 (relation 0: i -> next in its ring) and a pairing across them (relation 1).
RINGS = torch.tensor(
    [(i, 0, (i // 8) * 8 + (i % 8 + 1) % 8) for i in range(N)]
    + [(i, 1, (i + 8) % N) for i in range(N)]
)


def _encoder(**kwargs) -> CompGCNEncoder:
    base = dict(dim=32, init_dim=8, hidden_dim=12, composition="mult")
    return CompGCNEncoder(N, 2, RINGS, **{**base, **kwargs})


def _conve() -> ConvEDecoder:
    return ConvEDecoder(N, 32, k_w=4, k_h=8, kernel_size=3, num_filters=4)


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("num_bases", [0, 3])
@pytest.mark.parametrize("composition", ["sub", "mult", "corr"])
def test_embed_shapes_and_relations_match_the_layers(layers, num_bases, composition):
    encoder = _encoder(layers=layers, num_bases=num_bases, composition=composition).eval()
    z, rel = encoder.embed()
    assert z.shape == (N, 32) and rel.shape == (4, 32)
    assert torch.equal(encoder(torch.arange(N)), z)
    torch.testing.assert_close(encoder.relations(), rel)
    assert len(encoder.convs) == layers
    assert encoder.convs[0].in_channels == 8
    assert encoder.convs[-1].out_channels == 32


def test_one_layer_is_the_conv_on_the_learned_embeddings_with_tanh():
    encoder = _encoder().eval()
    conv = encoder.convs[0]
    graphs = compgcn_graphs(RINGS[:, [0, 2]].t(), RINGS[:, 1], N, 2)
    x, rel = conv(encoder.entity, graphs, None, encoder.relation)
    z, r = encoder.embed()
    torch.testing.assert_close(z, x)
    torch.testing.assert_close(r, rel)
    assert float(z.detach().abs().max()) <= 1.0  # tanh


def test_encoder_builds_its_graphs_once_and_again_after_an_edit(monkeypatch):
    """The graphs are built on the first embed and reused (compgcn_graphs compares a copy of
    every edge per call); an in-place edit of the triples or a new buffer rebuilds them."""
    import galfast.models.compgcn_encoder as module

    calls = []

    def counting(*args):
        calls.append(args)
        return compgcn_graphs(*args)

    monkeypatch.setattr(module, "compgcn_graphs", counting)
    encoder = _encoder().eval()
    first = encoder.embed()[0]
    assert torch.equal(encoder.embed()[0], first) and len(calls) == 1
    encoder.edge_index[1, 0] = 5  # head 0 of relation 0 now points at entity 5
    edited = encoder.embed()[0]
    assert len(calls) == 2 and not torch.equal(edited, first)
    encoder.edge_type = encoder.edge_type.clone()
    torch.testing.assert_close(encoder.embed()[0], edited)
    assert len(calls) == 3


def test_hidden_dropout_applies_in_training_only():
    encoder = _encoder(hidden_dropout=0.5)
    torch.manual_seed(0)
    z = encoder.train().embed()[0]
    assert 0.3 < float((z == 0).float().mean()) < 0.7
    assert not bool((encoder.eval().embed()[0] == 0).any())


@pytest.mark.parametrize("decoder", ["distmult", "conve"])
@pytest.mark.parametrize("num_bases", [0, 3])
def test_every_parameter_gets_a_gradient(decoder, num_bases):
    torch.manual_seed(0)
    model = KGLinkPredictor(
        _encoder(num_bases=num_bases, layers=2),
        DistMultDecoder(N, 32) if decoder == "distmult" else _conve(),
    )
    logits = model(torch.tensor([0, 3, 9]), torch.tensor([0, 1, 3]))
    assert logits.shape == (3, N)
    one_to_n_loss(logits, torch.zeros(3, N)).backward()
    # The decoder's logits reach every encoder parameter: entities through the convolution,
    # relations (or their bases) through each layer's W_rel.
    for name, p in model.encoder.named_parameters():
        assert p.grad is not None and bool(p.grad.abs().sum() > 0), name
    assert all(p.grad is not None for p in model.decoder.parameters())


def test_head_scores_as_the_model_does():
    torch.manual_seed(0)
    model = KGLinkPredictor(_encoder(), _conve()).eval()
    batch = next(iter(OneToNBatches(kg_queries(RINGS, N, 2), batch_size=8, seed=0)))
    z = model.encoder(torch.arange(N))
    torch.testing.assert_close(OneToNHead(model)(z, batch), model(batch.entity, batch.relation))
    loss = OneToNLoss(0.1)(model(batch.entity, batch.relation), batch)
    torch.testing.assert_close(
        loss, one_to_n_loss(model(batch.entity, batch.relation), batch.targets, 0.1)
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(layers=3), "layers must be 1 or 2"),
        (dict(dim=0), "dim must be >= 1, got 0"),
        (dict(dim=2.5), "dim must be an int, got float"),
        (dict(num_bases=-1), "num_bases must be >= 0, got -1"),
        (dict(composition="add"), "composition"),
    ],
)
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _encoder(**kwargs)


@pytest.mark.parametrize(
    "triples, message",
    [
        (RINGS[:, :2], r"\[T, 3\]"),
        (RINGS.int(), "int64"),
        (torch.tensor([[0, 2, 1]]), "relation ids"),
        (torch.tensor([[0, 0, N]]), "entity ids"),
    ],
)
def test_bad_triples_are_refused(triples, message):
    with pytest.raises(ValueError, match=message):
        CompGCNEncoder(N, 2, triples, dim=8, init_dim=4)


def test_forward_checks_the_trainer_inputs():
    from galfast import Graph

    encoder = _encoder()
    with pytest.raises(ValueError, match="every entity"):
        encoder(torch.arange(3))
    graph = Graph.from_edge_index(torch.tensor([[0], [1]]), num_nodes=3)
    with pytest.raises(ValueError, match="3 nodes"):
        encoder(torch.arange(N), graph)


def test_head_needs_a_link_predictor():
    with pytest.raises(ValueError, match="KGLinkPredictor"):
        OneToNHead(DistMultDecoder(N, 4))
    with pytest.raises(ValueError, match="label_smoothing"):
        OneToNLoss(1.0)


@pytest.mark.parametrize("decoder, least_mrr", [("distmult", 0.8), ("conve", 0.6)])
def test_the_model_learns_to_rank_the_planted_triples_first(decoder, least_mrr):
    torch.manual_seed(0)
    model = KGLinkPredictor(
        _encoder(), DistMultDecoder(N, 32) if decoder == "distmult" else _conve()
    )
    queries = kg_queries(RINGS, N, 2)
    before = evaluate_link_prediction(model.eval().scorer(), RINGS, queries).both.mrr
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    model.train()
    for batch in (b for _ in range(80) for b in OneToNBatches(queries, batch_size=None, seed=0)):
        loss = one_to_n_loss(model(batch.entity, batch.relation), batch.targets, 0.1)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    after = evaluate_link_prediction(model.eval().scorer(), RINGS, queries).both
    # Chance is about 0.2 (16 candidates); each query here has one answer to learn. ConvE's
    # batch norms learn slower on 64 queries in 80 steps (0.69 here; DistMult 0.9).
    assert before < 0.4
    assert after.mrr > least_mrr and after.hits[10] > 0.9
