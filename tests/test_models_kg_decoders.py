"""ConvE and DistMult 1-N decoders (shapes, CompGCN's image layout, gradients, bad input) and
the 1-N loss with label smoothing against a hand computation."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from galfast.models import ConvEDecoder, DistMultDecoder, one_to_n_loss, smooth_labels


def _inputs(batch, dim, entities, seed=0, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    return tuple(
        torch.randn(*shape, generator=gen, dtype=dtype, requires_grad=True)
        for shape in ((batch, dim), (batch, dim), (entities, dim))
    )


def test_conve_defaults_follow_compgcn_shape_arithmetic():
    decoder = ConvEDecoder(num_entities=11)
    # 2*10 x 20 image, 7x7 kernel, no padding: 14 x 14 x 200 filters into the linear map.
    assert decoder.fc.in_features == 14 * 14 * 200 and decoder.fc.out_features == 200
    assert decoder.conv.bias is None and decoder.bias.shape == (11,)
    head, relation, entities = _inputs(4, 200, 11)
    assert decoder(head, relation, entities).shape == (4, 11)


def test_conve_image_interleaves_head_and_relation():
    decoder = ConvEDecoder(5, 12, k_w=2, k_h=6, num_filters=3, kernel_size=3).eval()
    head, relation, entities = _inputs(2, 12, 5, seed=1)
    image = torch.empty(2, 1, 4, 6)
    for b in range(2):
        for i in range(24):  # h_0, r_0, h_1, r_1, ... filling rows of length k_h
            source = head if i % 2 == 0 else relation
            image[b, 0, i // 6, i % 6] = source[b, i // 2]
    x = decoder.conv(decoder.input_norm(image))
    x = F.relu(decoder.conv_norm(x)).flatten(1)
    query = F.relu(decoder.hidden_norm(decoder.fc(x)))
    expected = query @ entities.t() + decoder.bias
    torch.testing.assert_close(decoder(head, relation, entities), expected)


def test_conve_gradients_reach_inputs_and_parameters():
    decoder = ConvEDecoder(6, 12, k_w=2, k_h=6, num_filters=4, kernel_size=3)
    head, relation, entities = _inputs(5, 12, 6)
    targets = (torch.rand(5, 6, generator=torch.Generator().manual_seed(0)) < 0.3).float()
    one_to_n_loss(decoder(head, relation, entities), targets).backward()
    for name, tensor in [("head", head), ("relation", relation), ("entities", entities)]:
        assert tensor.grad is not None and tensor.grad.abs().sum() > 0, name
    # input_norm's shift reaches conv_norm as one constant per filter (the convolution is
    # unpadded), which conv_norm's batch mean removes: its gradient is zero up to rounding.
    for name, parameter in decoder.named_parameters():
        assert parameter.grad is not None, name
        if name == "input_norm.bias":
            assert parameter.grad.abs().max() < 1e-5
        else:
            assert parameter.grad.abs().sum() > 0, name


def test_conve_one_query_is_refused_by_name_in_training_and_scored_in_eval():
    """Batch norm over one query has no variance: torch's message ("Expected more than 1
    value per channel") named neither the decoder nor the way out."""
    decoder = ConvEDecoder(5, 12, k_w=2, k_h=6, num_filters=3, kernel_size=3)
    head, relation, entities = _inputs(1, 12, 5)
    with pytest.raises(ValueError, match="ConvEDecoder got one query in training mode"):
        decoder(head, relation, entities)
    assert decoder(*_inputs(2, 12, 5)).shape == (2, 5)
    assert decoder.eval()(head, relation, entities).shape == (1, 5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_entities": 3, "dim": 100}, "dim must equal k_w \\* k_h"),
        ({"num_entities": 3, "dim": 12, "k_w": 2, "k_h": 6, "kernel_size": 5}, "does not fit"),
        ({"num_entities": 0}, "must be >= 1"),
    ],
)
def test_conve_bad_configuration(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ConvEDecoder(**kwargs)


@pytest.mark.parametrize("decoder_type", ["conve", "distmult"])
def test_decoders_refuse_bad_inputs(decoder_type):
    decoder = (
        ConvEDecoder(4, 12, k_w=2, k_h=6, kernel_size=3)
        if decoder_type == "conve"
        else DistMultDecoder(4, 12)
    ).eval()
    head, relation, entities = _inputs(3, 12, 4)
    with pytest.raises(ValueError, match=r"head must be a \[B, 12\]"):
        decoder(head[:, :5], relation, entities)
    with pytest.raises(ValueError, match="same rows"):
        decoder(head, relation[:2], entities)
    with pytest.raises(ValueError, match=r"entities must be a \[4, 12\]"):
        decoder(head, relation, entities[:3])
    with pytest.raises(ValueError, match="relation must be a float"):
        decoder(head, torch.zeros(3, 12, dtype=torch.int64), entities)
    with pytest.raises(ValueError, match="share a dtype"):
        decoder(head, relation, entities.double())


def test_distmult_is_trilinear_plus_bias_and_gradchecks():
    decoder = DistMultDecoder(5, 4).double()
    with torch.no_grad():
        decoder.bias.copy_(torch.arange(5.0))
    head, relation, entities = _inputs(3, 4, 5, dtype=torch.float64)
    expected = torch.einsum("bd,bd,nd->bn", head, relation, entities) + decoder.bias
    torch.testing.assert_close(decoder(head, relation, entities), expected)
    assert torch.autograd.gradcheck(decoder, (head, relation, entities))
    assert DistMultDecoder(5, 4, bias=False).bias is None


def test_loss_matches_hand_computation():
    logits = torch.tensor([[2.0, -1.0, 0.5, 0.0, -3.0, 1.0, 0.0, 0.0, 0.0, 4.0]])
    targets = torch.zeros(1, 10)
    targets[0, [0, 9]] = 1.0
    eps, n = 0.2, 10
    total = 0.0
    for s, y in zip(logits[0].tolist(), targets[0].tolist()):
        label = (1 - eps) * y + 1 / n  # 0.9 for answers, 0.1 for the rest
        p = 1 / (1 + math.exp(-s))
        total -= label * math.log(p) + (1 - label) * math.log(1 - p)
    assert one_to_n_loss(logits, targets, eps).item() == pytest.approx(total / n, rel=1e-6)
    # CompGCN computes BCELoss on sigmoid scores: the same value.
    smoothed = smooth_labels(targets, eps)
    reference = torch.nn.BCELoss()(torch.sigmoid(logits), smoothed)
    assert one_to_n_loss(logits, targets, eps).item() == pytest.approx(reference.item(), rel=1e-6)


def test_loss_without_smoothing_and_with_large_logits():
    targets = torch.tensor([[1.0, 0.0]])
    assert one_to_n_loss(torch.zeros(1, 2), targets, 0.0).item() == pytest.approx(math.log(2))
    assert math.isfinite(one_to_n_loss(torch.tensor([[-200.0, 200.0]]), targets).item())


def test_loss_bad_arguments():
    with pytest.raises(ValueError, match="label_smoothing must lie in"):
        one_to_n_loss(torch.zeros(1, 2), torch.zeros(1, 2), 1.0)
    with pytest.raises(ValueError, match=r"both be \[B, N\]"):
        one_to_n_loss(torch.zeros(1, 2), torch.zeros(1, 3))
