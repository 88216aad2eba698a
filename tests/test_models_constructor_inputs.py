"""galfast.models constructors and forward calls with the values users pass by hand: sizes as
NumPy integers, bools, floats or None, dropout and slopes out of range or NaN, inputs of the
wrong width or dtype. Each is taken, or refused with an error naming the argument."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from galfast.models import (
    MPNN,
    AttackerMLP,
    BilinearRatingDecoder,
    CompGCNEncoder,
    ConvEDecoder,
    DistMultDecoder,
    DotProductLinkDecoder,
    EmbeddingEncoder,
)

TRIPLES = torch.tensor([[0, 0, 1], [1, 0, 2]])
N64 = np.int64


# --- NumPy integer sizes are sizes ----------------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [
        lambda: AttackerMLP(N64(4), N64(2), hidden=(N64(3),)),
        lambda: BilinearRatingDecoder(N64(4), N64(5), N64(2)),
        lambda: EmbeddingEncoder(N64(5), N64(4)),
        lambda: CompGCNEncoder(
            N64(3), N64(1), TRIPLES, dim=N64(8), init_dim=N64(4), hidden_dim=N64(4), layers=N64(2)
        ),
        lambda: ConvEDecoder(N64(7), N64(8), k_w=N64(2), k_h=N64(4), kernel_size=N64(3)),
        lambda: DistMultDecoder(N64(7), N64(4)),
        lambda: MPNN(N64(11), N64(5), N64(8), message_steps=N64(2), processing_steps=N64(2)),
    ],
    ids=["attacker", "bilinear", "embedding", "compgcn", "conve", "distmult", "mpnn"],
)
def test_numpy_integer_sizes_are_taken(build):
    model = build()
    assert sum(p.numel() for p in model.parameters()) > 0


def test_numpy_sizes_build_the_same_model_as_ints():
    torch.manual_seed(0)
    a = MPNN(N64(11), N64(5), N64(8), message_steps=N64(2))
    assert a.message_steps == 2 and type(a.message_steps) is int
    torch.manual_seed(0)
    b = MPNN(11, 5, 8, message_steps=2)
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(p, q), name


# --- sizes of the wrong kind ----------------------------------------------------------------


@pytest.mark.parametrize("value", [2.5, 4.0, True, None, "4"])
@pytest.mark.parametrize(
    "build, name",
    [
        (lambda v: AttackerMLP(v, 2), "in_dim"),
        (lambda v: AttackerMLP(4, v), "out_dim"),
        (lambda v: AttackerMLP(4, 2, hidden=(v,)), "hidden"),
        (lambda v: BilinearRatingDecoder(v), "dim"),
        (lambda v: BilinearRatingDecoder(4, v), "num_levels"),
        (lambda v: BilinearRatingDecoder(4, 5, v), "num_bases"),
    ],
    ids=["in_dim", "out_dim", "hidden", "dim", "num_levels", "num_bases"],
)
def test_a_size_of_another_kind_is_named(build, name, value):
    with pytest.raises(ValueError, match=f"{name} must be an int"):
        build(value)


@pytest.mark.parametrize("hidden", [None, 8, "32"])
def test_attacker_hidden_must_be_a_sequence_of_sizes(hidden):
    with pytest.raises(ValueError, match="hidden must be a sequence of layer sizes"):
        AttackerMLP(4, 2, hidden=hidden)


def test_mpnn_message_steps_is_no_bool():
    with pytest.raises(ValueError, match="message_steps must be an int"):
        MPNN(11, 5, 8, message_steps=True)


# --- rates and slopes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, refusal",
    [
        (math.nan, "must be a finite number, got nan"),  # passes nn.Dropout's own check
        (1.5, "must lie in \\[0, 1\\), got 1.5"),
        (1.0, "must lie in \\[0, 1\\), got 1.0"),  # would drop every activation
        (-0.1, "must lie in \\[0, 1\\), got -0.1"),
        (np.float32(1.0), "must lie in \\[0, 1\\), got 1.0"),
        (None, "must be a finite number, got NoneType"),
        ("0.1", "must be a finite number, got str"),
        (True, "must be a finite number, got bool"),
    ],
)
@pytest.mark.parametrize(
    "build, name",
    [
        (lambda v: AttackerMLP(4, 2, dropout=v), "dropout"),
        (
            lambda v: CompGCNEncoder(3, 1, TRIPLES, dim=8, init_dim=4, conv_dropout=v),
            "conv_dropout",
        ),
        (
            lambda v: CompGCNEncoder(3, 1, TRIPLES, dim=8, init_dim=4, hidden_dropout=v),
            "hidden_dropout",
        ),
        (
            lambda v: ConvEDecoder(7, 8, k_w=2, k_h=4, kernel_size=3, feature_dropout=v),
            "feature_dropout",
        ),
        (
            lambda v: ConvEDecoder(7, 8, k_w=2, k_h=4, kernel_size=3, hidden_dropout=v),
            "hidden_dropout",
        ),
    ],
    ids=["attacker", "compgcn-conv", "compgcn-hidden", "conve-feature", "conve-hidden"],
)
def test_a_dropout_outside_zero_one_is_named(build, name, value, refusal):
    with pytest.raises(ValueError, match=f"^{name} {refusal}"):
        build(value)


def test_dropout_zero_and_numpy_rates_are_taken():
    AttackerMLP(4, 2, dropout=0)
    AttackerMLP(4, 2, dropout=np.float32(0.25))
    CompGCNEncoder(3, 1, TRIPLES, dim=8, init_dim=4, conv_dropout=0, hidden_dropout=np.float32(0.1))
    ConvEDecoder(7, 8, k_w=2, k_h=4, kernel_size=3, feature_dropout=0.0, hidden_dropout=0)


@pytest.mark.parametrize("rate", [np.float32(0.25), torch.tensor(0.25)])
def test_numpy_and_tensor_rates_give_the_dropout_of_a_float(rate):
    # A 0-d tensor was refused ("must lie in [0, 1)"); both reach nn.Dropout as a float.
    dropouts = [m for m in AttackerMLP(4, 2, dropout=rate).modules() if isinstance(m, nn.Dropout)]
    assert dropouts and all(type(m.p) is float and m.p == 0.25 for m in dropouts)
    conve = ConvEDecoder(7, 8, k_w=2, k_h=4, kernel_size=3, feature_dropout=rate)
    assert type(conve.feature_dropout.p) is float and conve.feature_dropout.p == 0.25


@pytest.mark.parametrize("size", [N64(4), torch.tensor(4)])
def test_numpy_and_tensor_sizes_build_int_sizes(size):
    attacker = AttackerMLP(size, 2, hidden=(size,))
    assert [m.in_features for m in attacker.modules() if isinstance(m, nn.Linear)] == [4, 4]
    decoder = DistMultDecoder(size + 3, size)
    assert type(decoder.num_entities) is int and decoder.num_entities == 7


@pytest.mark.parametrize("slope", [math.nan, math.inf, None, "0.2", True])
def test_attacker_slope_must_be_a_finite_number(slope):
    with pytest.raises(ValueError, match="negative_slope must be a finite number"):
        AttackerMLP(4, 2, negative_slope=slope)


@pytest.mark.parametrize(
    "max_norm, message",
    [
        ("1", "max_norm must be a finite number, got str"),  # a TypeError in the comparison
        (True, "max_norm must be a finite number, got bool"),  # passed as 1
        (math.nan, "max_norm must be a finite number, got nan"),
        (math.inf, "max_norm must be a finite number, got inf"),
        (-1.0, "max_norm must be > 0, got -1.0"),
        (0, "max_norm must be > 0, got 0.0"),
    ],
)
def test_embedding_max_norm_must_be_a_positive_number(max_norm, message):
    with pytest.raises(ValueError, match=message):
        EmbeddingEncoder(5, 4, max_norm=max_norm)


@pytest.mark.parametrize("max_norm", [np.float32(1.5), torch.tensor(1.5), 1.5])
def test_embedding_max_norm_is_kept_as_a_float(max_norm):
    encoder = EmbeddingEncoder(5, 4, max_norm=max_norm)
    assert type(encoder.max_norm) is float and encoder.max_norm == 1.5


def test_embedding_activation_must_be_callable():
    with pytest.raises(ValueError, match="activation must be a module or callable"):
        EmbeddingEncoder(5, 4, activation="relu")


# --- bilinear decoder levels ----------------------------------------------------------------


@pytest.mark.parametrize("levels", [[1.0, math.nan], [1.0, math.inf]])
def test_rating_levels_must_be_finite(levels):
    with pytest.raises(ValueError, match="levels must be finite"):
        BilinearRatingDecoder(4, 2, levels=levels)


def test_rating_levels_must_be_one_value_per_level():
    with pytest.raises(ValueError, match="levels must be a flat sequence"):
        BilinearRatingDecoder(4, 2, levels=[[1.0], [2.0]])


# --- forward inputs -------------------------------------------------------------------------


def test_attacker_names_a_wrong_width_or_dtype():
    mlp = AttackerMLP(4, 2)
    with pytest.raises(ValueError, match=r"z must be a \[num_nodes, 4\] tensor"):
        mlp(torch.randn(3, 5))
    with pytest.raises(ValueError, match="z has dtype torch.float64"):
        mlp(torch.randn(3, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="z has dtype torch.int64"):
        mlp(torch.ones(3, 4, dtype=torch.long))
    assert mlp(torch.randn(0, 4)).shape == (0, 2)  # an empty batch is fine


def test_bilinear_decoder_names_a_wrong_dtype_and_logit_width():
    dec = BilinearRatingDecoder(4)
    with pytest.raises(ValueError, match="z_src and z_dst must be torch.float32"):
        dec(torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"logits must be \[B, 5\]"):
        dec.expected_rating(torch.randn(3, 4))
    assert dec(torch.randn(0, 4), torch.randn(0, 4)).shape == (0, 5)


@pytest.mark.parametrize("shapes", [((3, 4), (3, 5)), ((3, 1, 4), (3, 4)), ((3, 4), (2, 4))])
def test_dot_product_decoder_refuses_pairs_of_another_shape(shapes):
    # [3, 1, 4] with [3, 4] broadcast to a [3, 3] matrix of every pair: silently wrong.
    with pytest.raises(ValueError, match="z_src and z_dst must have the same shape"):
        DotProductLinkDecoder()(torch.randn(*shapes[0]), torch.randn(*shapes[1]))


@pytest.mark.parametrize("other", [(4,), (1, 4)])
def test_dot_product_decoder_scores_one_node_against_many(other):
    z, one = torch.randn(3, 4), torch.randn(*other)
    expected = z @ one.reshape(4)
    torch.testing.assert_close(DotProductLinkDecoder()(z, one), expected)
    torch.testing.assert_close(DotProductLinkDecoder()(one, z), expected)


def test_embedding_encoder_refuses_two_dimensional_ids():
    with pytest.raises(ValueError, match="ids must be a 1-D tensor"):
        EmbeddingEncoder(5, 4)(torch.tensor([[1, 2]]), None)


def test_compgcn_forward_names_bad_ids_and_graph():
    enc = CompGCNEncoder(3, 1, TRIPLES, dim=8, init_dim=4)
    with pytest.raises(ValueError, match="ids must be a tensor"):
        enc([0, 1, 2])
    with pytest.raises(ValueError, match="graph must be a Graph"):
        enc(torch.arange(3), "graph")
