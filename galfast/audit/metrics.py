"""Attack metrics per attribute kind (their chance levels are in ``chance.py``).

Counted with numpy: scikit-learn's metric functions validate and convert their inputs on every
call (about 10 ms each, a second of an audit's CPU), and importing scikit-learn takes about a
second more, which an audit without its classic attackers now never pays. The values are
scikit-learn's (``f1_score``, ``accuracy_score``, ``balanced_accuracy_score``,
``mean_absolute_error``, ``mean_squared_error``: the same ratios of the same counts, averaged
in the same order, so the same floats, but for the class averages left undefined on one class,
see :func:`attack_metrics`); the ROC-AUC is the rank statistic, the exact area
rounded once, which can differ from scikit-learn's trapezoid sum in the last bits
(``tests/test_audit_metrics.py`` checks every metric against scikit-learn)."""

from __future__ import annotations

from typing import Optional

import numpy as np

__all__ = [
    "METRIC_RANGE",
    "PRIMARY_METRIC",
    "attack_metrics",
    "clipped_interval",
    "higher_is_stronger",
    "primary_metric",
]

# The metric that ranks attackers (the headline): the strongest attacker has the highest
# macro-F1 (lowest MAE for continuous attributes).
PRIMARY_METRIC = {
    "binary": "macro_f1",
    "categorical": "macro_f1",
    "multilabel": "macro_f1",
    "continuous": "mae",
}


# The values each attack metric can take. A Student-t interval over a few seeds can run past
# them (0.934..1.041 for a macro-F1 near 1); a score no attacker could have had is shown
# clipped to them.
METRIC_RANGE: dict[str, tuple[float, Optional[float]]] = {
    "macro_f1": (0.0, 1.0),
    "micro_f1": (0.0, 1.0),
    "accuracy": (0.0, 1.0),
    "balanced_accuracy": (0.0, 1.0),
    "auc": (0.0, 1.0),
    "advantage": (0.0, 1.0),
    "mae": (0.0, None),
    "rmse": (0.0, None),
}


def clipped_interval(
    metric: str,
    low: float,
    high: float,
    ranges: Optional[dict[str, tuple[float, Optional[float]]]] = None,
) -> tuple[float, float]:
    """``(low, high)`` within the values ``metric`` can take (unchanged for an unknown one);
    ``ranges`` (default :data:`METRIC_RANGE`) says which, the plots' adds the task metrics."""
    floor, ceiling = (METRIC_RANGE if ranges is None else ranges).get(metric, (None, None))
    if floor is not None:
        low, high = max(low, floor), max(high, floor)
    if ceiling is not None:
        low, high = min(low, ceiling), min(high, ceiling)
    return low, high


def higher_is_stronger(metric: str) -> bool:
    return metric not in ("mae", "rmse")


def _same_length(y: np.ndarray, *others: Optional[np.ndarray]) -> None:
    for other in others:
        if other is not None and len(other) != len(y):
            raise ValueError(f"the predictions hold {len(other)} rows for {len(y)} true values")


def _divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator as float64, 0 where the denominator is 0 (zero_division=0)."""
    numerator = numerator.astype(np.float64)
    denominator = denominator.astype(np.float64)
    out = np.zeros_like(numerator)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out


class _Counts:
    """Per class (sorted union of the true and predicted values): true positives, and how
    often the class is true and predicted."""

    def __init__(self, y: np.ndarray, pred: np.ndarray) -> None:
        self.classes = np.union1d(y, pred)
        true = np.searchsorted(self.classes, y)
        predicted = np.searchsorted(self.classes, pred)
        size = self.classes.size
        self.true = np.bincount(true, minlength=size)
        self.predicted = np.bincount(predicted, minlength=size)
        self.hits = np.bincount(true[true == predicted], minlength=size)

    def f1(self) -> np.ndarray:
        # F1 = 2 TP / (2 TP + FP + FN) = 2 TP / (true + predicted)
        return _divide(2 * self.hits, self.true + self.predicted)

    def recall(self) -> np.ndarray:
        return _divide(self.hits, self.true)


def _macro_f1(y: np.ndarray, pred: np.ndarray) -> float:
    return float(np.mean(_Counts(y, pred).f1()))


def _multilabel_f1(y: np.ndarray, pred: np.ndarray) -> tuple[float, float]:
    """(micro, macro) F1 of [n, L] 0/1 labels: one positive class per column. A single
    column is scored as scikit-learn scores it, as the classes 0 and 1 of one label."""
    if y.ndim == 1 or y.shape[1] == 1:
        counts = _Counts(y.ravel(), pred.ravel())
        micro = _divide(np.array(2 * counts.hits.sum()), np.array(2 * y.shape[0]))
        return float(micro), float(np.mean(counts.f1()))
    y, pred = y != 0, pred != 0
    hits = np.count_nonzero(y & pred, axis=0)
    true, predicted = np.count_nonzero(y, axis=0), np.count_nonzero(pred, axis=0)
    micro = _divide(np.array(2 * hits.sum()), np.array(true.sum() + predicted.sum()))
    return float(micro), float(np.mean(_divide(2 * hits, true + predicted)))


def _roc_auc(y: np.ndarray, scores: np.ndarray) -> float:
    """P(score of a random A = 1 node > a random A = 0 node's), ties counting one half: from
    the positives' rank sum (tied scores share their mean rank)."""
    scores = np.asarray(scores, dtype=np.float64).ravel()
    if not np.isfinite(scores).all():
        raise ValueError("the attacker's scores hold NaN or infinite values")
    order = np.argsort(scores, kind="stable")
    ordered = scores[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], ordered.size]
    # Twice each run's mean rank (ranks 1..n): start + 1 + end, an exact integer.
    doubled = np.repeat(starts + 1 + ends, ends - starts)
    positive = y[order] == 1
    num_positive = np.count_nonzero(positive)
    num_negative = positive.size - num_positive
    # Twice the Mann-Whitney U, an exact integer: one rounding in the division.
    doubled_u = int(doubled[positive].sum()) - num_positive * (num_positive + 1)
    return doubled_u / (2 * num_positive * num_negative)


def _difference(pred: np.ndarray, y: np.ndarray) -> np.ndarray:
    """pred - y in their common float dtype (float32 stays float32, as in scikit-learn)."""
    dtype = np.result_type(pred, y)
    if not np.issubdtype(dtype, np.floating):
        dtype = np.float64
    return pred.astype(dtype, copy=False) - y.astype(dtype, copy=False)


def _as_columns(pred: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both as ``[n, columns]``, one column count: a ``[n]`` target against ``[n, 1]``
    predictions broadcast to ``[n, n]`` and gave an MAE of other pairs."""
    pred, y = pred.reshape(len(pred), -1), y.reshape(len(y), -1)
    if pred.shape[1] != y.shape[1]:
        raise ValueError(
            f"the predictions hold {pred.shape[1]} column(s) for {y.shape[1]} target column(s)"
        )
    return pred, y


def _column_means(values: np.ndarray) -> float:
    """The mean over columns of each column's mean (scikit-learn's uniform multioutput)."""
    return float(np.mean(np.mean(values.reshape(values.shape[0], -1), axis=0)))


def attack_metrics(
    kind: str, y: np.ndarray, pred: np.ndarray, scores: Optional[np.ndarray] = None
) -> dict[str, Optional[float]]:
    """Scores an attacker's predictions ``pred`` of the true values ``y``.

    - binary: ``macro_f1``, ``accuracy``, ``auc`` (ranking ROC-AUC from ``scores`` = P(A=1);
      None when the test set holds one class), ``balanced_accuracy`` (what the reference
      code's MovieLens "AUC" on thresholded predictions computes: compare it with the
      paper's AUC column) and ``advantage`` = :math:`|P(f=1|A=1) - P(f=1|A=0)|`
      (= |TPR - FPR| = |2 * balanced accuracy - 1| when both classes occur);
    - categorical: ``macro_f1``, ``accuracy``, ``balanced_accuracy``;
    - multilabel (``[n, L]`` 0/1): ``micro_f1``, ``macro_f1``, ``accuracy`` (exact set match);
    - continuous: ``mae``, ``rmse``.

    F1 scores are 0 for a class that is neither true nor predicted correctly (scikit-learn's
    ``zero_division=0``); ``balanced_accuracy`` is the mean recall over the classes present in
    ``y``. Where ``y`` holds one class, ``macro_f1`` and ``balanced_accuracy`` are None with
    ``auc`` and ``advantage``: nothing is there to tell apart, and scikit-learn's values (that
    class's F1 and recall) read as a perfect score for an attacker that never strays from it.
    """
    y, pred = np.asarray(y), np.asarray(pred)
    _same_length(y, pred, scores)
    if kind == "continuous":
        if not np.isfinite(pred).all():  # a diverged attacker: its MAE was NaN in the report
            raise ValueError(
                "the attacker's predictions hold NaN or infinite values (its training "
                "diverged: try a smaller lr)"
            )
        error = _difference(*_as_columns(pred, y))
        return {
            "mae": _column_means(np.abs(error)),
            "rmse": float(np.sqrt(_column_means(error * error))),
        }
    if kind == "multilabel":
        micro, macro = _multilabel_f1(y, pred)
        exact = np.all(y.reshape(len(y), -1) == pred.reshape(len(pred), -1), axis=1)
        return {"micro_f1": micro, "macro_f1": macro, "accuracy": float(np.mean(exact))}
    counts = _Counts(y, pred)
    recall = counts.recall()
    present = counts.true > 0
    out: dict[str, Optional[float]] = {
        "macro_f1": float(np.mean(counts.f1())),
        "accuracy": float(np.mean(y == pred)),
        "balanced_accuracy": float(np.mean(recall[present])),
    }
    if np.count_nonzero(present) < 2:
        out["macro_f1"] = out["balanced_accuracy"] = None
    if kind == "binary":
        out["auc"] = out["advantage"] = None
        if np.count_nonzero(present) == 2:
            out["auc"] = None if scores is None else _roc_auc(y, scores)
            tpr = recall[counts.classes == 1]
            fpr = 1.0 - recall[counts.classes == 0]
            out["advantage"] = float(abs(tpr[0] - fpr[0]))
    return out


def primary_metric(kind: str, y: np.ndarray, pred: np.ndarray) -> float:
    """``attack_metrics(kind, y, pred)[PRIMARY_METRIC[kind]]`` alone: the searches rank every
    trial on it. Where ``y`` holds one class it is scikit-learn's value, not None: a search
    still ranks its trials on such a validation fold."""
    y, pred = np.asarray(y), np.asarray(pred)
    _same_length(y, pred)
    if kind == "continuous":
        return _column_means(np.abs(_difference(pred, y)))
    if kind == "multilabel":
        return _multilabel_f1(y, pred)[1]
    return _macro_f1(y, pred)
