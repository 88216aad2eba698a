"""The audit's numpy metrics against scikit-learn's, the functions they replace: the same
floats for every count-based metric and the errors, the ROC-AUC to its last bits."""

import math

import numpy as np
import pytest

from galfast.audit.metrics import attack_metrics, primary_metric

metrics = pytest.importorskip("sklearn.metrics")


def _reference(kind, y, pred, scores=None):
    """What galfast.audit.metrics computes, with scikit-learn."""
    if kind == "continuous":
        return {
            "mae": float(metrics.mean_absolute_error(y, pred)),
            "rmse": float(np.sqrt(metrics.mean_squared_error(y, pred))),
        }
    if kind == "multilabel":
        return {
            "micro_f1": float(metrics.f1_score(y, pred, average="micro", zero_division=0)),
            "macro_f1": float(metrics.f1_score(y, pred, average="macro", zero_division=0)),
            "accuracy": float(metrics.accuracy_score(y, pred)),
        }
    out = {
        "macro_f1": float(metrics.f1_score(y, pred, average="macro", zero_division=0)),
        "accuracy": float(metrics.accuracy_score(y, pred)),
        "balanced_accuracy": float(
            metrics.recall_score(y, pred, labels=np.unique(y), average="macro", zero_division=0)
        ),
    }
    if np.unique(y).size < 2:  # nothing to tell apart: left undefined, see attack_metrics
        out["macro_f1"] = out["balanced_accuracy"] = None
    if kind == "binary":
        out["auc"] = out["advantage"] = None
        if np.unique(y).size == 2:
            out["auc"] = None if scores is None else float(metrics.roc_auc_score(y, scores))
            tpr = metrics.recall_score(y, pred, pos_label=1, zero_division=0)
            fpr = 1.0 - metrics.recall_score(y, pred, pos_label=0, zero_division=0)
            out["advantage"] = float(abs(tpr - fpr))
    return out


def _assert_same(ours, want):
    assert ours.keys() == want.keys()
    for name, value in want.items():
        if name == "auc" and value is not None:
            # One rounding of the exact area against a trapezoid sum: a few ulps at most.
            assert ours[name] == pytest.approx(value, rel=4e-16, abs=4e-16), name
        else:
            assert ours[name] == value, name


def _case(kind, gen, n):
    if kind == "continuous":
        dtype = gen.choice([np.float32, np.float64])
        columns = int(gen.integers(1, 4))
        y = gen.normal(size=(n, columns)).astype(dtype)
        y = y[:, 0] if columns == 1 and gen.random() < 0.5 else y
        return y, (y + gen.normal(size=y.shape)).astype(dtype), None
    if kind == "multilabel":
        labels = int(gen.integers(1, 5))
        y = (gen.random((n, labels)) < gen.random()).astype(np.int64)
        pred = (gen.random((n, labels)) < gen.random()).astype(np.int64)
        return y, pred, None
    classes = 2 if kind == "binary" else int(gen.integers(2, 7))
    y = gen.integers(0, classes, n)
    pred = np.where(gen.random(n) < gen.random(), y, gen.integers(0, classes, n))
    if kind == "categorical" and gen.random() < 0.3:
        pred[gen.integers(0, n)] = classes  # a predicted class absent from y
    if gen.random() < 0.15:
        y[:] = y[0]  # one class in y
    if gen.random() < 0.15:
        pred[:] = pred[0]  # one class predicted
    # Scores with ties (rounded), or continuous ones, or constant ones.
    scores = gen.random(n)
    choice = gen.random()
    if choice < 0.4:
        scores = np.round(scores, 1)
    elif choice < 0.5:
        scores = np.full(n, 0.5)
    return y, pred, scores


@pytest.mark.parametrize("kind", ["binary", "categorical", "multilabel", "continuous"])
def test_random_cases_match_scikit_learn(kind):
    gen = np.random.default_rng(sum(map(ord, kind)))
    for _ in range(150):
        n = int(gen.choice([1, 2, 3, 7, 50, 333]))
        y, pred, scores = _case(kind, gen, n)
        _assert_same(attack_metrics(kind, y, pred, scores), _reference(kind, y, pred, scores))


def test_larger_binary_case_and_exact_auc():
    gen = np.random.default_rng(5)
    y = gen.integers(0, 2, 20_000)
    scores = np.round(gen.random(20_000) + 0.3 * y, 3)
    pred = (scores > 0.6).astype(np.int64)
    _assert_same(attack_metrics("binary", y, pred, scores), _reference("binary", y, pred, scores))
    # The exact area: pairs ordered correctly plus half the tied pairs, over all pairs.
    pos, neg = scores[y == 1], scores[y == 0]
    above = np.searchsorted(np.sort(neg), pos, side="left").sum()
    ties = (
        np.searchsorted(np.sort(neg), pos, side="right")
        - np.searchsorted(np.sort(neg), pos, side="left")
    ).sum()
    exact = (2 * int(above) + int(ties)) / (2 * pos.size * neg.size)
    assert attack_metrics("binary", y, pred, scores)["auc"] == exact


def test_primary_metric_matches_scikit_learn():
    gen = np.random.default_rng(9)
    for kind in ("binary", "categorical", "multilabel", "continuous"):
        for _ in range(30):
            y, pred, _ = _case(kind, gen, int(gen.choice([1, 5, 200])))
            if kind == "continuous":
                want = float(metrics.mean_absolute_error(y, pred))
            elif kind == "multilabel":
                want = _reference(kind, y, pred)["macro_f1"]
            else:  # scikit-learn's value even on one class: the searches rank on it
                want = float(metrics.f1_score(y, pred, average="macro", zero_division=0))
            assert primary_metric(kind, y, pred) == want


def test_bad_inputs_raise():
    y = np.array([0, 1, 1, 0])
    with pytest.raises(ValueError, match="3 rows for 4 true values"):
        attack_metrics("binary", y, np.array([0, 1, 1]))
    with pytest.raises(ValueError, match="rows for 4 true values"):
        attack_metrics("binary", y, y, np.array([0.1, 0.2]))
    with pytest.raises(ValueError, match="NaN or infinite"):
        attack_metrics("binary", y, y, np.array([0.1, math.nan, 0.3, 0.4]))
    with pytest.raises(ValueError, match="2 rows for 4 true values"):
        primary_metric("continuous", y.astype(float), np.zeros(2))
