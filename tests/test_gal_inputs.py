"""Inputs users pass to galfast.gal (attributes, pairings, pair_nodes) that used to crash deep
inside torch, or give wrong results silently; each is now a ValueError naming the problem or
correct behaviour."""

import numpy as np
import pytest
import torch

from galfast import Graph
from galfast.gal import (
    KnownValues,
    Pairing,
    SensitiveAttribute,
    check_walkable,
    clip_weights,
    derive_seed,
    pair_nodes,
    parse_pairing,
    seeded_generator,
    seeded_globals,
)

PATH = Graph.from_edge_index(torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), num_nodes=4)
NODES = torch.tensor([0, 1, 2])


# ------------------------------------------------------------------ SensitiveAttribute
@pytest.mark.parametrize("kind", ["binary", "categorical"])
def test_complex_class_ids_are_refused(kind):
    # binary: accepted, the imaginary part dropped later; categorical: NotImplementedError
    with pytest.raises(ValueError, match="1-D integer tensor"):
        SensitiveAttribute("g", kind, torch.tensor([0j, 1 + 0j]))


@pytest.mark.parametrize(
    "field, tensor, message",
    [
        ("values", torch.zeros(3, dtype=torch.long).to("meta"), "values is on the meta device"),
        ("values", torch.tensor([0, 1, 1]).to_sparse(), "values must be a dense tensor"),
        ("mask", torch.ones(3, dtype=torch.bool).to_sparse(), "mask must be a dense tensor"),
        ("index", torch.arange(3).to("meta"), "index is on the meta device"),
    ],
)
def test_tensors_torch_cannot_read_here_are_named(field, tensor, message):
    # Were torch's errors from inside the checks (Tensor.item() on meta tensors, sparse ops).
    fields = {"values": torch.tensor([0, 1, 1]), field: tensor}
    with pytest.raises(ValueError, match=f"g: {message}"):
        SensitiveAttribute("g", "binary", **fields)


def test_float8_continuous_values_are_named():
    with pytest.raises(ValueError, match="g: values must be float16, bfloat16, float32"):
        SensitiveAttribute("g", "continuous", torch.rand(3).to(torch.float8_e5m2))


def test_complex_multilabel_values_are_refused():
    # were accepted; known() then cast them to float with a warning, dropping the imaginary part
    with pytest.raises(ValueError, match="multilabel values must be real"):
        SensitiveAttribute("g", "multilabel", torch.tensor([[0j, 1 + 0j]]))


@pytest.mark.parametrize("kind", ["multilabel", "continuous"])
def test_values_without_columns_are_refused(kind):
    # a [rows, 0] matrix gave an adversary with 0 outputs and NaN losses
    with pytest.raises(ValueError, match="at least one column"):
        SensitiveAttribute("g", kind, torch.zeros(3, 0))


@pytest.mark.parametrize("count", [torch.tensor(3.0), torch.tensor([3, 4])])
def test_num_classes_tensors_that_are_no_int_are_refused(count):
    # a raw TypeError from operator.index
    with pytest.raises(ValueError, match="num_classes must be an int"):
        SensitiveAttribute("g", "categorical", torch.tensor([0, 1]), num_classes=count)


@pytest.mark.parametrize(
    "num_nodes, message",
    [
        (2.0, "must be an int"),  # gave float node ids: tensor([0., 1.])
        (True, "must be an int"),  # "there are True nodes"
        ("2", "must be an int"),  # "values has 2 rows but there are 2 nodes"
        (-1, "must lie in"),
    ],
)
def test_known_refuses_a_node_count_that_is_no_count(num_nodes, message):
    attr = SensitiveAttribute("g", "binary", torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=f"num_nodes {message}"):
        attr.known(num_nodes)


def test_known_takes_numpy_and_tensor_counts():
    attr = SensitiveAttribute("g", "binary", torch.tensor([0, 1]))
    for count in (np.int64(2), torch.tensor(2)):
        assert attr.known(count).nodes.dtype == torch.int64


def test_lookup_in_an_empty_known_set_finds_nothing():
    # an IndexError from indexing an empty tensor
    known = KnownValues(torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long))
    keep, targets = known.lookup(torch.tensor([0, 3]))
    assert keep.numel() == 0 and targets.numel() == 0


def test_legitimate_attribute_dtypes_still_work():
    for dtype in (torch.int32, torch.uint8, torch.int16):
        attr = SensitiveAttribute("g", "binary", torch.tensor([0, 1], dtype=dtype))
        assert attr.known(2).targets.dtype == torch.int64
    multi = SensitiveAttribute("m", "multilabel", torch.tensor([[False, True]]))
    assert multi.known(1).targets.tolist() == [[0.0, 1.0]]
    masked = SensitiveAttribute(
        "c", "categorical", torch.tensor([0, -1, 2]), mask=torch.tensor([True, False, True])
    )
    assert masked.known(3).nodes.tolist() == [0, 2] and masked.num_classes == 3


# ------------------------------------------------------------------ parse_pairing / Pairing
@pytest.mark.parametrize("spec", ["nhop:\u0663", "nhop:1_0", "nhop:+2"])
def test_hop_counts_must_be_ascii_decimal(spec):
    # int() read Arabic-Indic digits, underscores and signs: "nhop:1_0" walked 10 hops
    with pytest.raises(ValueError, match="unknown pairing"):
        parse_pairing(spec)


@pytest.mark.parametrize("hops", [np.int64(2), torch.tensor(2)])
def test_numpy_and_tensor_hop_counts_are_accepted(hops):
    # refused as "unknown pairing ... with an integer n >= 1" though they are integers
    parsed = parse_pairing(("nhop", hops))
    assert parsed == Pairing(2) and type(parsed.hops) is int


@pytest.mark.parametrize("hops", [-1, 2.5, True, 33, "2"])
def test_pairing_refuses_bad_hops(hops):
    # Pairing(-1), Pairing(2.5) ... were built and passed through parse_pairing unchanged
    with pytest.raises(ValueError, match="Pairing hops must be an int in"):
        Pairing(hops)


def test_check_walkable_takes_a_pairing_spec():
    # an AttributeError: 'str' object has no attribute 'hops'
    check_walkable("nhop:3", "paper")
    with pytest.raises(ValueError, match="walk_mode 'exact' walks at most 4"):
        check_walkable("nhop:5", "exact")


# ------------------------------------------------------------------ pair_nodes
def test_pair_nodes_takes_a_pairing_spec():
    # an AttributeError: 'str' object has no attribute 'hops'
    assert pair_nodes(PATH, NODES, "node", seed=0).partners.tolist() == [0, 1, 2]
    assert pair_nodes(PATH, NODES, "neighbor", seed=0).partners.tolist() == [1, 2, 1]


@pytest.mark.parametrize(
    "nodes, message",
    [
        (torch.tensor([0, 7]), "not a node id in \\[0, 4\\)"),  # returned as partner 7
        (torch.tensor([0, -1]), "not a node id in \\[0, 4\\)"),  # read the last row of z
        (torch.tensor([0.0, 1.0]), "int64 or int32"),  # float partners
        (torch.tensor([True, False]), "int64 or int32"),
        (torch.tensor([[0, 1]]), "shape \\[num_nodes\\]"),
        ([0, 1], "must be a torch.Tensor"),  # AttributeError: no attribute 'numel'
    ],
)
def test_node_pairing_checks_its_nodes_as_walks_do(nodes, message):
    with pytest.raises(ValueError, match=message):
        pair_nodes(PATH, nodes, Pairing(0), seed=0)


@pytest.mark.parametrize("seed", [-1, 2**64, 1.5, None, True])
def test_node_pairing_checks_its_seed(seed):
    # ignored with the node pairing, refused with walks
    with pytest.raises(ValueError, match=r"seed must (be an int,|be >= 0,|lie in \[0, 2\*\*64\),)"):
        pair_nodes(PATH, NODES, Pairing(0), seed=seed)


def test_node_pairing_checks_its_walk_mode_and_graph():
    with pytest.raises(ValueError, match="walk_mode must be one of"):
        pair_nodes(PATH, NODES, Pairing(0), seed=0, walk_mode="fast")
    with pytest.raises(ValueError, match="graph must be a galfast.Graph"):
        pair_nodes("graph", NODES, Pairing(0), seed=0)
    # no graph is needed to read each node itself (the audit's node attack passes none)
    assert torch.equal(pair_nodes(None, NODES, Pairing(0), seed=0).partners, NODES)


def test_walk_seeds_take_numpy_integers():
    # sample_nhop refused np.int64 ("seed must be an int, got int64") that check_seed accepts
    walked = pair_nodes(PATH, NODES, Pairing(1), seed=np.uint64(3))
    same = pair_nodes(PATH, NODES, Pairing(1), seed=3)
    assert torch.equal(walked.partners, same.partners)


def test_pairing_on_a_graph_without_edges_fails_every_walk():
    empty = Graph.from_edge_index(torch.zeros(2, 0, dtype=torch.long), num_nodes=3)
    assert pair_nodes(empty, NODES, Pairing(0), seed=0).failures == 0
    walked = pair_nodes(empty, NODES, Pairing(2), seed=0)
    assert walked.failures == 3 and walked.partners.numel() == 0
    assert pair_nodes(PATH, NODES[:0], Pairing(0), seed=0).partners.numel() == 0


# ------------------------------------------------------------------ losses and seeding
@pytest.mark.parametrize("clip", [-1.0, 0.0, float("nan"), None, "1", True])
def test_clip_weights_refuses_a_bound_that_is_no_positive_number(clip):
    # -1.0 set every weight to -1, NaN made them NaN; None and "1" were raw TypeErrors
    critic = torch.nn.Linear(2, 2)
    before = critic.weight.detach().clone()
    with pytest.raises(ValueError, match="clip must be a finite number > 0"):
        clip_weights(critic, clip)
    assert torch.equal(critic.weight, before)


def test_clip_weights_clamps_into_the_bound():
    critic = torch.nn.Linear(2, 2)
    with torch.no_grad():
        critic.weight.fill_(3.0)
    clip_weights(critic, np.float32(0.5))
    assert critic.weight.max().item() == 0.5


@pytest.mark.parametrize("seed", [-1, 1.5, 2**64, True])
def test_derive_seed_checks_its_seed(seed):
    # 1.5 gave seed 1's draws, -1 another seed's: silently
    with pytest.raises(ValueError, match=r"seed must (be an int,|be >= 0,|lie in \[0, 2\*\*64\),)"):
        derive_seed(seed, "epoch")


def test_derive_seed_names_an_unknown_purpose_and_bad_counters():
    with pytest.raises(ValueError, match="purpose must be one of"):  # a KeyError
        derive_seed(0, "epochs")
    with pytest.raises(ValueError, match="counters must be ints >= 0"):  # NumPy's error
        derive_seed(0, "epoch", -1)
    assert derive_seed(np.int64(3), "epoch", np.int64(2)) == derive_seed(3, "epoch", 2)


@pytest.mark.parametrize("make", [seeded_generator, lambda s: seeded_globals(s).__enter__()])
@pytest.mark.parametrize("seed", [-1, 2**64, 1.5])
def test_seeded_generators_check_their_seed(make, seed):
    # 2**64: "Overflow when unpacking long long"; -1 was taken
    with pytest.raises(ValueError, match=r"seed must (be an int,|be >= 0,|lie in \[0, 2\*\*64\),)"):
        make(seed)


def test_binary_values_may_be_bool():
    # Were refused as "not a 1-D integer tensor", while the audit command reads bool labels.
    attribute = SensitiveAttribute("g", "binary", torch.tensor([True, False, True]))
    known = attribute.known(3)
    assert known.targets.tolist() == [1, 0, 1] and known.nodes.tolist() == [0, 1, 2]
