"""Bad input to the knowledge-graph readers, the dataset builders and the link-prediction
models' arguments: a ValueError that names the problem (file and line for a file), never a
bare low-level error or silently different data."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from kg_fixtures import pin_folder, write_wn18rr

from galfast.cli import main
from galfast.datasets import random_link_split, sample_negative_edges, wn18rr
from galfast.datasets.kg_attributes import entity_types, pos_and_sense
from galfast.datasets.kg_triples import read_triple_splits
from galfast.datasets.knowledge_graph_dataset import (
    KnowledgeGraphDataset,
    build_knowledge_graph_dataset,
)
from galfast.models import (
    CompGCNEncoder,
    ConvEDecoder,
    DistMultDecoder,
    EmbeddingEncoder,
    RankMetrics,
    evaluate_link_prediction,
    kg_queries,
    one_to_n_loss,
    smooth_labels,
)
from galfast.train import OneToNLoss

POS_HEADER = b"id\tname\tPOS_tag\tsense\n"


def _file(tmp_path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


# Ranks and Hits@k.


@pytest.mark.parametrize("bad", [0.0, -1.0, 0.5, float("nan"), float("inf")])
def test_rank_metrics_refuse_ranks_below_one_or_not_finite(bad):
    with pytest.raises(ValueError, match="ranks must be finite and >= 1"):
        RankMetrics.of(torch.tensor([1.0, bad]))
    assert RankMetrics.of(torch.tensor([1.0, 2.5])).mr == 1.75  # realistic ties: half ranks


@pytest.mark.parametrize("ranks", [torch.tensor([True]), [1.0, 2.0]])
def test_rank_metrics_refuse_ranks_that_are_not_numbers(ranks):
    with pytest.raises(ValueError, match="ranks must be a real tensor"):
        RankMetrics.of(ranks)


@pytest.mark.parametrize(
    "hits_at, message",
    [
        ((0,), r"hits_at\[0\] must be >= 1, got 0"),
        ((3, -1), r"hits_at\[1\] must be >= 1, got -1"),
        ((2.5,), r"hits_at\[0\] must be an int, got float"),
        ((True,), r"hits_at\[0\] must be an int, got bool"),  # would count as Hits@1
        (10, "hits_at must be a sequence of ints >= 1, got 10"),
        ("13", "hits_at must be a sequence of ints >= 1, got '13'"),
    ],
)
def test_hits_at_must_be_ints_of_at_least_one(hits_at, message):
    with pytest.raises(ValueError, match=message):
        RankMetrics.of(torch.tensor([1.0]), hits_at)


def test_numpy_and_tensor_hits_at_key_the_hits_as_ints():
    # NumPy's ints keyed the hits dict as given (np.int64 keys in a JSON record); 0-d tensors
    # were refused
    metrics = RankMetrics.of(torch.tensor([1.0, 4.0]), (np.int64(1), torch.tensor(3)))
    assert metrics.hits == {1: 0.5, 3: 0.5}
    assert [type(k) for k in metrics.hits] == [int, int]


def test_evaluation_checks_hits_at_before_ranking_anything():
    def score(entity, relation):
        raise AssertionError("scored before hits_at was checked")

    triples = torch.tensor([[0, 0, 1]])
    known = kg_queries(triples, 2, 1)
    with pytest.raises(ValueError, match="hits_at"):
        evaluate_link_prediction(score, triples, known, hits_at=(0,))


@pytest.mark.parametrize(
    "smoothing, message",
    [
        ("0.1", "must be a finite number, got str"),
        (None, "must be a finite number, got NoneType"),  # would skip the smoothing
        (True, "must be a finite number, got bool"),
        (math.nan, "must be a finite number, got nan"),
        (1.0, r"must lie in \[0, 1\), got 1.0"),
    ],
)
def test_label_smoothing_must_be_a_number(smoothing, message):
    logits, targets = torch.zeros(2, 3), torch.eye(3)[:2]
    with pytest.raises(ValueError, match=f"^label_smoothing {message}"):
        one_to_n_loss(logits, targets, smoothing)
    with pytest.raises(ValueError, match=f"^label_smoothing {message}"):
        OneToNLoss(smoothing)  # the trainer's loss, refused when built


@pytest.mark.parametrize("smoothing", [np.float32(0.25), torch.tensor(0.25)])
def test_numpy_and_tensor_label_smoothing_smooth_as_the_float_does(smoothing):
    # a 0-d tensor was refused ("label_smoothing must lie in [0, 1)")
    logits, targets = (
        torch.randn(2, 3, generator=torch.Generator().manual_seed(0)),
        torch.eye(3)[:2],
    )
    assert torch.equal(smooth_labels(targets, smoothing), smooth_labels(targets, 0.25))
    expected = one_to_n_loss(logits, targets, float(np.float32(0.25)))
    assert torch.equal(one_to_n_loss(logits, targets, smoothing), expected)


# Sizes of the models.


@pytest.mark.parametrize(
    "build, argument",
    [
        (lambda: DistMultDecoder(num_entities=10.0, dim=4), "num_entities"),
        (lambda: DistMultDecoder(num_entities=10, dim=True), "dim"),
        (lambda: DistMultDecoder(num_entities=10, dim=4.0), "dim"),
        (
            lambda: ConvEDecoder(num_entities=10.0, dim=4, k_w=2, k_h=2, kernel_size=1),
            "num_entities",
        ),
        (
            lambda: ConvEDecoder(num_entities=10, dim=4, k_w=2, k_h=2, kernel_size=True),
            "kernel_size",
        ),
        (lambda: ConvEDecoder(10, 4, k_w=2, k_h=2, kernel_size=1, num_filters=2.0), "num_filters"),
        (lambda: EmbeddingEncoder(num_nodes=10.0, dim=4), "num_nodes"),
        (lambda: EmbeddingEncoder(num_nodes=10, dim=True), "dim"),
    ],
)
def test_model_sizes_must_be_ints(build, argument):
    with pytest.raises(ValueError, match=f"{argument} must be an int"):
        build()


@pytest.mark.parametrize("layers", [1.0, True])
def test_compgcn_layers_must_be_an_int(layers):
    with pytest.raises(ValueError, match="layers must be 1 or 2"):
        CompGCNEncoder(3, 1, torch.tensor([[0, 0, 1]]), dim=8, init_dim=4, layers=layers)


# The triple and attribute files.


def test_fields_are_stripped_of_surrounding_whitespace(tmp_path):
    # A trailing space, a Windows line end, a byte-order mark and a line of spaces.
    train = _file(tmp_path, "train.txt", b"\xef\xbb\xbfa\tr\tb \r\nb\t r\tc\r\n   \n")
    raw = read_triple_splits({"train": train})
    assert raw.entities == ("a", "b", "c") and raw.relations == ("r",)
    assert raw.splits["train"].tolist() == [[0, 0, 1], [1, 0, 2]]


def test_attribute_fields_are_stripped_too(tmp_path):
    types = _file(tmp_path, "types.txt", b"a\t/t1 \r\nb\t/t1\n a\t/t2\n")
    found, counts = entity_types(types, ("a", "b"), 2, "all")
    assert found["types"][2] == ("/t1", "/t2") and counts == {"typed": 2, "top": 2}
    pos = _file(tmp_path, "pos.tsv", POS_HEADER + b"a \tx\tNN \t1\r\n")
    found, missing = pos_and_sense(pos, ("a",), 20)
    assert found["pos"][3].tolist() == [0] and missing == 0


@pytest.mark.parametrize("line", [b" \tr\tb\n", b"a\t \tb\n", b"a\tr\t \n"])
def test_a_field_of_only_whitespace_is_empty(tmp_path, line):
    train = _file(tmp_path, "train.txt", b"a\tr\tb\n" + line)
    with pytest.raises(ValueError, match=r"train.txt, line 2: expected 'head<TAB>relation<TAB>"):
        read_triple_splits({"train": train})


def test_a_split_without_triples_is_refused(tmp_path):
    train = _file(tmp_path, "train.txt", b"a\tr\tb\n")
    valid = _file(tmp_path, "valid.txt", b"\n \n")
    with pytest.raises(ValueError, match=r"valid.txt holds no triples"):
        read_triple_splits({"train": train, "valid": valid})


def test_bad_utf8_names_file_and_line(tmp_path):
    # Far enough into the file that a chunked decoder fails several lines early.
    train = _file(tmp_path, "train.txt", b"a\tr\tb\n" * 3000 + b"a\tr\t\xff\n")
    with pytest.raises(ValueError, match=r"train.txt, line 3001: not UTF-8 text \(byte 0xff"):
        read_triple_splits({"train": train})
    types = _file(tmp_path, "types.txt", b"a\t/t\nb\t\xfe\n")
    with pytest.raises(ValueError, match=r"types.txt, line 2: not UTF-8"):
        entity_types(types, ("a", "b"), 1, "all")
    pos = _file(tmp_path, "pos.tsv", POS_HEADER + b"a\t\xc3\tNN\t1\n")
    with pytest.raises(ValueError, match=r"pos.tsv, line 2: not UTF-8"):
        pos_and_sense(pos, ("a",), 20)


def test_cli_reports_bad_utf8_in_one_line(tmp_path, monkeypatch, capsys):
    folder = write_wn18rr(tmp_path / "wn18rr")
    path = folder / "valid.txt"
    path.write_bytes(path.read_bytes() + b"00001740\t_hypernym\t\xff\n")
    pin_folder(monkeypatch, "wn18rr", folder)
    argv = ["run", "--dataset", "wn18rr", "--encoder", "compgcn", "--root", str(folder)]
    assert main([*argv, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "valid.txt, line 2: not UTF-8 text" in err


@pytest.mark.parametrize("sense", ["²", "9" * 30])
def test_sense_numbers_int_cannot_read_or_int64_cannot_hold(tmp_path, sense):
    pos = _file(tmp_path, "pos.tsv", POS_HEADER + f"a\tx\tNN\t{sense}\n".encode())
    if sense == "²":
        with pytest.raises(ValueError, match="pos.tsv, line 2: malformed row"):
            pos_and_sense(pos, ("a",), 20)
    else:  # a huge sense is just one more sense >= sense_cap
        assert pos_and_sense(pos, ("a",), 20)[0]["sense"][1].tolist() == [19]


def test_loader_reads_stripped_names(tmp_path, monkeypatch):
    folder = write_wn18rr(tmp_path / "wn18rr")
    path = folder / "test.txt"
    path.write_bytes(path.read_bytes().replace(b"\n", b" \r\n"))
    pin_folder(monkeypatch, "wn18rr", folder)
    assert all(name == name.strip() for name in wn18rr(root=folder).entities)


# Hand-built knowledge graphs.


def _splits(**changed):
    splits = {
        "train": np.array([[0, 0, 1]]),
        "valid": np.array([[1, 0, 2]]),
        "test": np.array([[2, 0, 0]]),
    }
    return {**splits, **changed}


def _build(**changed):
    fields = dict(
        name="toy",
        entities=("a", "b", "c"),
        relations=("r",),
        splits=_splits(),
        attributes={},
        license="",
    )
    return build_knowledge_graph_dataset(**{**fields, **changed})


@pytest.mark.parametrize(
    "changed, message",
    [
        ({"splits": _splits(train=np.array([[0.5, 0, 1]]))}, r"splits\['train'\] must hold int"),
        ({"splits": _splits(valid=np.array([[0, 0, 1, 2, 0, 1]]))}, r"must be a \[T, 3\] array"),
        ({"splits": _splits(test=np.array([[0], [0], [1]]))}, r"must be a \[T, 3\] array"),
        ({"splits": {"train": np.array([[0, 0, 1]])}}, r"missing \['valid', 'test'\]"),
        ({"splits": _splits(train=np.array([[0, 0, 7]]))}, r"train holds an entity id outside"),
        ({"entities": ("a", "b", "a")}, "entities must be distinct names, 'a' is twice"),
        (
            {"attributes": {"p": ("categorical", np.array([0.5]), ("x", "y"), np.array([0]))}},
            "attribute 'p' values must hold integers",
        ),
    ],
)
def test_builder_refuses_what_a_cast_would_change(changed, message):
    with pytest.raises(ValueError, match=message):
        _build(**changed)


def test_dataset_fields_must_be_tensors():
    dataset = _build()
    fields = {name: getattr(dataset, name) for name in dataset.__dataclass_fields__}
    with pytest.raises(ValueError, match=r"train must be an int64 \[T, 3\] tensor, got list"):
        KnowledgeGraphDataset(**{**fields, "train": [[0, 0, 1]]})
    attribute = {
        "attributes": {"p": torch.tensor([0])},
        "attribute_kinds": {"p": "categorical"},
        "attribute_classes": {"p": ("x",)},
        "attribute_nodes": {"p": [0]},
    }
    with pytest.raises(ValueError, match=r"attribute_nodes\['p'\] must be a tensor"):
        KnowledgeGraphDataset(**{**fields, **attribute})


# Link splits.


@pytest.mark.parametrize(
    "pairs, message",
    [
        (np.array([[0, 0], [1, 1]]), "a pair twice"),
        (np.array([[1, 0], [0, 2]]), "u < v"),
        (np.array([0, 1, 2]), r"\[2, P\] array"),
        (np.array([[0.0], [1.0]]), "integer node ids"),
    ],
)
def test_link_split_refuses_pairs_that_are_not_unique_and_ordered(pairs, message):
    with pytest.raises(ValueError, match=message):
        random_link_split(pairs, 4)


def test_negative_sampling_checks_forbidden_ids_and_count():
    rng = np.random.default_rng(0)
    # (0, 5) in a 3-node graph would pack into the key of (1, 2) and forbid that pair.
    with pytest.raises(ValueError, match=r"forbidden holds a node id outside \[0, 3\)"):
        sample_negative_edges(3, np.array([[0], [5]]), 1, rng)
    with pytest.raises(ValueError, match="^count must be an int, got float"):
        sample_negative_edges(5, np.zeros((2, 0), dtype=np.int64), 2.5, rng)
    with pytest.raises(ValueError, match="^count must be >= 0, got -1"):
        sample_negative_edges(5, np.zeros((2, 0), dtype=np.int64), -1, rng)
