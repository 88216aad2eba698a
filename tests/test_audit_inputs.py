"""galfast.audit's public API on the inputs users get wrong: each mistake is a ValueError or a
TypeError naming it, never a deep torch / numpy / scikit-learn error, a crash in a worker or a
silently wrong report. The audits here are tiny (40 nodes, one seed, a step or two)."""

from __future__ import annotations

import importlib
import math
import warnings

import numpy as np
import pytest
import torch
from cli_errors_helpers import one_error_line

from galfast import Graph, SensitiveAttribute
from galfast.audit import (
    AttackResult,
    AuditReport,
    SearchConfig,
    audit,
    audit_split,
    summarize,
    tradeoff_bound,
)
from galfast.cli import main

pytestmark = pytest.mark.usefixtures("one_torch_thread")

N = 40
TRAIN = torch.arange(28)
TEST = torch.arange(28, N)
TINY = dict(train_idx=TRAIN, test_idx=TEST, attacks=("node",), seeds=1, epochs=1, min_steps=1)
TINY_SEARCH = SearchConfig(trials=1, max_epochs=2, patience=1)


def _leaky(scale: float = 1.0):
    """Embeddings whose first column reveals a binary A exactly, times ``scale``."""
    gen = torch.Generator().manual_seed(0)
    a = torch.arange(N) % 2
    z = torch.cat([3.0 * (2 * a.float() - 1).view(-1, 1), torch.randn(N, 3, generator=gen)], 1)
    return z * scale, SensitiveAttribute("a", "binary", a)


def _run(**overrides):
    z, attr = _leaky()
    embeddings = overrides.pop("embeddings", z)
    sensitive = overrides.pop("sensitive", attr)
    return audit(embeddings, sensitive, **{**TINY, **overrides})


def _ring() -> Graph:
    edges = torch.stack([torch.arange(N), (torch.arange(N) + 1) % N])
    return Graph.from_edge_index(edges, N, symmetrize=True)


# ---------------------------------------------------------------- embeddings
@pytest.mark.parametrize("shape", [(N, 0), (0, 4)])
def test_embeddings_without_rows_or_columns_are_named(shape):
    with pytest.raises(ValueError, match="embeddings must have at least one row and one column"):
        _run(embeddings=torch.zeros(shape))


def test_embeddings_too_large_for_the_attackers_statistics_are_refused():
    # 3e20 squared overflows float32: k-NN standardised every column to 0 and saw no leak.
    z, _ = _leaky(1e20)
    with pytest.raises(ValueError, match="overflow the attackers' float32 statistics"):
        _run(embeddings=z)


def test_float64_embeddings_are_held_to_float64_limits():
    z, _ = _leaky(1e20)
    report = _run(embeddings=z.double(), attackers=["linear"], min_steps=50)
    assert report.result("a", "node").metrics["macro_f1"].mean == 1.0


@pytest.mark.parametrize("family", ["linear"])
def test_tiny_embeddings_still_leak(family):
    # Columns with a standard deviation under 1e-12 were divided by 1e-12, not their own
    # spread: the linear attacker saw features of 1e-1 and reported no leak at all.
    z, attr = _leaky(1e-13)
    kwargs = dict(TINY, min_steps=50, attackers=[family], search=TINY_SEARCH)
    report = audit(z, attr, **kwargs)
    assert report.result("a", "node", family).metrics["macro_f1"].mean == 1.0


# ---------------------------------------------------------------- sensitive, attacks, attackers
@pytest.mark.parametrize("value", [None, 5])
def test_sensitive_that_is_not_an_attribute_list(value):
    with pytest.raises(TypeError, match="sensitive must be a SensitiveAttribute or a list"):
        _run(sensitive=value)


@pytest.mark.parametrize("field", ["attacks", "attackers"])
@pytest.mark.parametrize("value", [None, "node"])
def test_attacks_and_attackers_as_one_string_or_none(field, value):
    with pytest.raises(TypeError, match=f"{field} must be a list"):
        _run(**{field: value})


# ---------------------------------------------------------------- train_idx / test_idx
@pytest.mark.parametrize(
    "value, error, fragment",
    [
        (None, TypeError, "test_idx must be node ids or a bool mask, got NoneType"),
        ({30, 31}, TypeError, "test_idx must be node ids or a bool mask, got set"),
        ("30", TypeError, "test_idx must be node ids or a bool mask, got str"),
        ([], ValueError, "test_idx holds no node"),
        ([2**70], ValueError, "test_idx must be node ids or a bool mask"),
        (torch.tensor([30, 31], dtype=torch.complex64), ValueError, "complex64"),
        (np.array([30, 31], dtype=np.uint8), ValueError, "uint8"),
    ],
)
def test_bad_test_idx(value, error, fragment):
    with pytest.raises(error, match=fragment):
        _run(test_idx=value)


def test_uint8_mask_is_not_read_as_node_ids_0_and_1():
    # torch indexes with a uint8 tensor as a mask; read as ids it silently trained on 2 nodes.
    mask = (torch.arange(N) < 28).to(torch.uint8)
    with pytest.raises(ValueError, match="train_idx has dtype torch.uint8"):
        _run(train_idx=mask)


def test_bool_masks_and_numpy_ids_are_accepted():
    report = _run(train_idx=np.arange(N) < 28, test_idx=np.arange(28, N, dtype=np.int32))
    assert report.config["n_train_idx"] == 28 and report.config["n_test_idx"] == 12


# ---------------------------------------------------------------- training settings
@pytest.mark.parametrize(
    "hidden, error, fragment",
    [
        ((1.5,), ValueError, "hidden sizes must be an int >= 1, got 1.5"),
        ((True,), ValueError, "hidden sizes must be an int >= 1, got True"),
        ((0,), ValueError, "hidden sizes must be an int >= 1, got 0"),
        (32, TypeError, "hidden must be a list of layer sizes"),
        ("32", TypeError, "hidden must be a list of layer sizes"),
        (None, TypeError, "hidden must be a list of layer sizes"),
    ],
)
def test_bad_hidden(hidden, error, fragment):
    with pytest.raises(error, match=fragment):
        _run(hidden=hidden)


def test_hidden_empty_is_a_linear_mlp():
    assert _run(hidden=(), attackers=["mlp"]).config["hidden"] == []


@pytest.mark.parametrize("search", [{"trials": 1}, 5])
def test_search_that_is_not_a_search_config(search):
    with pytest.raises(TypeError, match="search must be a SearchConfig"):
        _run(search=search, strength="strong")


@pytest.mark.parametrize(
    "field, value",
    [
        ("trials", 1.5),
        ("trials", True),
        ("trials", float("nan")),
        ("trials", None),
        ("max_epochs", 2.5),
        ("max_epochs", float("nan")),
        ("patience", float("inf")),
        ("batch_size", "8"),
    ],
)
def test_search_config_counts(field, value):
    with pytest.raises(ValueError, match=f"{field} must be an int >= 1"):
        SearchConfig(**{field: value})


@pytest.mark.parametrize("value", ["0.2", None])
def test_search_config_val_fraction_type(value):
    with pytest.raises(ValueError, match="val_fraction must be a number in"):
        SearchConfig(val_fraction=value)


def test_search_config_numpy_ints_are_accepted():
    assert SearchConfig(trials=np.int64(2)).trials == 2


# ---------------------------------------------------------------- graph
@pytest.mark.parametrize(
    "graph, fragment",
    [
        ("edges", "graph must be a galfast.Graph"),
        (Graph.from_edge_index(torch.zeros(2, 0, dtype=torch.long), N + 1), "41 nodes"),
    ],
)
def test_a_graph_given_is_checked_even_for_node_attacks(graph, fragment):
    with pytest.raises(ValueError, match=fragment):
        _run(graph=graph)


def test_node_attack_needs_no_graph():
    assert _run(graph=None, attackers=["linear"]).result("a", "node").n_test == 12


# ---------------------------------------------------------------- strong audits on small splits
def test_strong_audit_needs_two_training_nodes():
    # One training node leaves no validation row: the tuned head failed in torch's copy_.
    with pytest.raises(ValueError, match="a: the strong attackers need at least 2 training nodes"):
        _run(train_idx=[0], strength="strong", attackers=["linear"], search=TINY_SEARCH)


def test_boosted_trees_with_a_class_only_in_validation():
    # The validation fold can hold a class the fit rows lack (a rare category): scikit-learn's
    # early stopping refused it ("y contains previously unseen labels").
    report = _run(train_idx=[0, 1], strength="strong", attackers=["linear"], search=TINY_SEARCH)
    assert report.result("a", "node", "hgb").n_train == 2


# ---------------------------------------------------------------- task labels
@pytest.mark.parametrize(
    "labels, error, fragment",
    [
        ("abc", TypeError, "task_labels must be a tensor of binary labels, got str"),
        (torch.ones(N, dtype=torch.complex64), ValueError, "complex64"),
        (torch.full((N,), 2), ValueError, "task_labels must be binary"),
        (torch.full((N,), -1), ValueError, r"task_labels are known \(>= 0\) on no node"),
    ],
)
def test_bad_task_labels_fail_before_training(monkeypatch, labels, error, fragment):
    module = importlib.import_module("galfast.audit.audit_embeddings")

    def refuse(*args, **kwargs):
        raise AssertionError("training started before the error was found")

    monkeypatch.setattr(module, "_submit_attack", refuse)
    with pytest.raises(error, match=fragment):
        _run(task_labels=labels)


def test_task_labels_known_only_where_the_attribute_is_not(monkeypatch):
    z, _ = _leaky()
    attr = SensitiveAttribute("a", "binary", torch.arange(20) % 2, index=torch.arange(20))
    labels = torch.cat([torch.full((20,), -1), torch.arange(20) % 2])
    with pytest.raises(ValueError, match="a: task_labels are known on no node where a is"):
        audit(
            z,
            attr,
            **{**TINY, "train_idx": torch.arange(14), "test_idx": torch.arange(14, N)},
            task_labels=labels,
        )


# ---------------------------------------------------------------- audit_split
@pytest.mark.parametrize(
    "nodes, error, fragment",
    [
        (torch.ones(5, dtype=torch.bool), ValueError, "nodes must hold integer node ids"),
        (torch.tensor([0.0, 1.0, 2.0]), ValueError, "nodes must hold integer node ids"),
        (torch.arange(6).view(2, 3), ValueError, "nodes must be 1-D"),
        (torch.tensor([1, 1, 2, 3]), ValueError, "nodes holds node 1 twice"),
        (torch.tensor([4]), ValueError, "at least 2 nodes"),
        (None, TypeError, "nodes must be node ids"),
    ],
)
def test_audit_split_bad_nodes(nodes, error, fragment):
    with pytest.raises(error, match=fragment):
        audit_split(nodes, 0)


def test_audit_split_takes_lists_and_numpy():
    train, test = audit_split([3, 1, 4, 5, 9], 0)
    assert sorted(torch.cat([train, test]).tolist()) == [1, 3, 4, 5, 9] and test.numel() == 1
    train2, test2 = audit_split(np.array([3, 1, 4, 5, 9]), 0)
    assert torch.equal(train, train2) and torch.equal(test, test2)


def test_audit_split_fraction_type():
    with pytest.raises(ValueError, match="test_fraction must be a number in"):
        audit_split(torch.arange(10), 0, "0.2")


# ---------------------------------------------------------------- summarize
@pytest.mark.parametrize(
    "values, error, fragment",
    [
        ("12", TypeError, "values must be a sequence of numbers, got str"),
        (None, TypeError, "values must be a sequence of numbers, got NoneType"),
        ([float("nan"), 1.0], ValueError, "summarize needs finite values"),
        ([float("inf"), 1.0], ValueError, "summarize needs finite values"),
    ],
)
def test_summarize_bad_values(values, error, fragment):
    with pytest.raises(error, match=fragment):
        summarize(values)


@pytest.mark.parametrize("confidence", [0, 1, 1.5, -0.5, float("nan"), True, "0.9"])
def test_summarize_bad_confidence(confidence):
    with pytest.raises(ValueError, match="confidence must be a number in"):
        summarize([1.0, 2.0], confidence=confidence)


def test_summarize_one_value_and_arrays():
    assert summarize([0.25]).half_width is None
    assert summarize(np.array([0.5, 0.7])).mean == pytest.approx(0.6)


# ---------------------------------------------------------------- tradeoff_bound
A4, Y4 = torch.tensor([0, 0, 1, 1]), torch.tensor([1, 1, 0, 1])


def test_tradeoff_bound_takes_lists_and_numpy():
    assert tradeoff_bound("a", [0, 0, 1, 1], [1, 1, 0, 1], 1.0).delta_y_given_a == 0.5
    assert tradeoff_bound("a", np.array([0, 0, 1, 1]), Y4.numpy(), 1.0).alpha == 0.5


@pytest.mark.parametrize(
    "radius, advantage, fragment",
    [
        (-1.0, 0.5, "radius must be >= 0, got -1.0"),
        (float("nan"), 0.5, "radius must be a finite number, got nan"),
        (None, 0.5, "radius must be a finite number, got NoneType"),
        (torch.tensor(-2.0), 0.5, "radius must be >= 0, got -2.0"),
        (1.0, -0.5, r"advantage must lie in \[0, 1\], got -0.5"),
        (1.0, 2.0, r"advantage must lie in \[0, 1\], got 2.0"),
        (1.0, float("nan"), "advantage must be a finite number, got nan"),
        (1.0, True, "advantage must be a finite number, got bool"),
    ],
)
def test_tradeoff_bound_radius_and_advantage(radius, advantage, fragment):
    # A negative radius or advantage raised the bound above its zero-advantage value; a NaN
    # advantage gave a bound of 0 (max(0, nan) is 0).
    with pytest.raises(ValueError, match=fragment):
        tradeoff_bound("a", A4, Y4, radius, advantage, 1.0)


def test_tradeoff_bound_complex_labels():
    with pytest.raises(ValueError, match="a must hold integer class labels, got torch.complex64"):
        tradeoff_bound("a", A4.to(torch.complex64), Y4, 1.0)


# ---------------------------------------------------------------- the report
def test_empty_report_prints_and_serialises():
    report = AuditReport([])
    assert report.headline() == [] and report.worst_cases() == []
    assert "no results" in str(report)
    assert report.to_dict()["results"] == []
    with pytest.raises(ValueError, match="no results for attribute 'a'"):
        report.worst_case("a")


def test_describe_worst_case_needs_a_result():
    with pytest.raises(TypeError, match="cell must be an AttackResult"):
        AuditReport([]).describe_worst_case("a")


def _nested(z):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's prototype note, once a process
        return torch.nested.nested_tensor([z[:3], z[:2]])


_UNREADABLE = {
    "float8": (lambda z: z.to(torch.float8_e4m3fn), "must be float16, bfloat16, float32"),
    "meta": (lambda z: z.to("meta"), "is on the meta device, which holds no values"),
    "sparse": (lambda z: z.to_sparse(), r"must be a dense tensor, got layout torch.sparse_coo"),
    "nested": (_nested, "must be a regular tensor, got a nested tensor"),
}


@pytest.mark.parametrize("kind", list(_UNREADABLE))
def test_embeddings_torch_cannot_read_here_are_named(kind):
    # Were torch's own errors from deep inside ("sum_cpu" not implemented for Float8_e4m3fn,
    # Tensor.item() on meta tensors, aten::aminmax on SparseCPU, NestedTensorImpl sizes).
    make, message = _UNREADABLE[kind]
    with pytest.raises(ValueError, match=f"embeddings {message}"):
        _run(embeddings=make(_leaky()[0]))


@pytest.mark.parametrize("kind", ["float8", "meta", "nested"])
def test_cli_embeddings_torch_cannot_read_here_are_one_line(kind, capsys, tmp_path):
    args = _files(tmp_path, N)
    make, message = _UNREADABLE[kind]
    torch.save(make(torch.randn(N, 4)), tmp_path / "z.pt")
    assert main(["audit", *args, "--strength", "fast"]) == 2
    assert message.replace("\\", "") in one_error_line(capsys, "audit")


# ---------------------------------------------------------------- the command line
def _files(tmp_path, known: int):
    gen = torch.Generator().manual_seed(0)
    torch.save(torch.randn(N, 4, generator=gen), tmp_path / "z.pt")
    labels = torch.full((N,), -1)
    labels[:known] = torch.arange(known) % 2
    torch.save(labels, tmp_path / "y.pt")
    return [str(tmp_path / "z.pt"), "--labels", str(tmp_path / "y.pt"), "--quiet"]


def test_cli_strong_audit_with_too_few_labels(capsys, tmp_path):
    assert main(["audit", *_files(tmp_path, 2), "--seeds", "1", "--epochs", "1"]) == 2
    line = one_error_line(capsys, "audit")
    assert "--strength strong needs at least 3 known labels" in line


def test_cli_fast_audit_with_two_labels_runs(capsys, tmp_path):
    args = [*_files(tmp_path, 2), "--seeds", "1", "--epochs", "1", "--strength", "fast"]
    # One test node: it holds one of the two classes, and the audit says so.
    with pytest.warns(UserWarning, match="no test node of the audit holds class"):
        assert main(["audit", *args]) == 0
    assert "worst case for attribute" in capsys.readouterr().out


def test_report_values_stay_finite():
    report = _run(attackers=["linear"])
    assert all(math.isfinite(s.mean) for r in report.results for s in r.metrics.values())


def test_a_diverged_continuous_attacker_is_named():
    # lr=1e6 sends the MLP's predictions to NaN: the report printed "nan" and to_json failed.
    attr = SensitiveAttribute("c", "continuous", torch.linspace(-1, 1, N))
    with pytest.raises(ValueError, match="the attacker's predictions hold NaN or infinite"):
        _run(sensitive=attr, attackers=["mlp"], lr=1e6, min_steps=50)


def test_tuned_head_whose_validation_loss_is_never_finite():
    # Two training nodes of two classes: the fit row's class-balanced weights give the other
    # class weight 0, the validation loss is 0/0 every epoch, and no weights were ever kept
    # (TypeError from torch's copy_). The CLI hit it with 3 known labels.
    search = SearchConfig(trials=12, max_epochs=2, patience=1)
    report = _run(train_idx=[0, 1], strength="strong", attackers=["linear"], search=search)
    assert report.result("a", "node", "tuned-mlp").n_train == 2


def test_cli_strong_audit_with_three_labels_runs(capsys, tmp_path):
    with pytest.warns(UserWarning, match="no test node of the audit holds class"):
        assert main(["audit", *_files(tmp_path, 3), "--seeds", "1", "--epochs", "1"]) == 0
    assert "worst case for attribute" in capsys.readouterr().out


def test_an_attack_result_of_an_unknown_kind_is_refused_when_built():
    # was a KeyError from strength(), once the report ranked its cells
    with pytest.raises(ValueError, match="kind must be one of"):
        AttackResult("a", "ordinal", "node", "mlp", {}, {}, 1.0, 1.0, 0.0)


@pytest.mark.parametrize("progress", ["no", 0, None])
def test_progress_must_be_a_bool(progress):
    # "no" is truthy: it showed the bar
    with pytest.raises(ValueError, match="progress must be a bool"):
        _run(progress=progress)


def test_an_all_false_mask_holds_no_node():
    # was torch's "min(): Expected reduction dim to be specified for input.numel() == 0"
    with pytest.raises(ValueError, match="test_idx holds no node"):
        _run(test_idx=torch.zeros(N, dtype=torch.bool))
