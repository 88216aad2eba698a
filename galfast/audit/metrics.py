"""Attack metrics per attribute kind (scikit-learn), and the trivial baselines' scores.

scikit-learn (which loads scipy.stats and pandas: about a second) is imported by the first
metric computed, not with the package, so ``import galfast`` and the CLI's help stay fast."""

from __future__ import annotations

from typing import Optional

import numpy as np

__all__ = [
    "PRIMARY_METRIC",
    "SKLEARN_MODULES",
    "attack_metrics",
    "baseline_metrics",
    "higher_is_stronger",
    "primary_metric",
]

# What the metrics import (see galfast.audit.threads.attacker_threads' load_first).
SKLEARN_MODULES = ("sklearn.metrics",)

# The metric that ranks attackers (the headline): the strongest attacker has the highest
# macro-F1 (lowest MAE for continuous attributes).
PRIMARY_METRIC = {
    "binary": "macro_f1",
    "categorical": "macro_f1",
    "multilabel": "macro_f1",
    "continuous": "mae",
}


def higher_is_stronger(metric: str) -> bool:
    return metric not in ("mae", "rmse")


def _balanced_accuracy(y: np.ndarray, pred: np.ndarray) -> float:
    # Mean recall over the classes present in y (sklearn's balanced_accuracy_score), written
    # with recall_score so a predicted class absent from y does not raise a warning.
    from sklearn.metrics import recall_score

    return float(recall_score(y, pred, labels=np.unique(y), average="macro", zero_division=0))


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
    """
    from sklearn.metrics import (
        accuracy_score,
        f1_score,
        mean_absolute_error,
        mean_squared_error,
        recall_score,
        roc_auc_score,
    )

    if kind == "continuous":
        return {
            "mae": float(mean_absolute_error(y, pred)),
            "rmse": float(np.sqrt(mean_squared_error(y, pred))),
        }
    if kind == "multilabel":
        return {
            "micro_f1": float(f1_score(y, pred, average="micro", zero_division=0)),
            "macro_f1": float(f1_score(y, pred, average="macro", zero_division=0)),
            "accuracy": float(accuracy_score(y, pred)),
        }
    out: dict[str, Optional[float]] = {
        "macro_f1": float(f1_score(y, pred, average="macro", zero_division=0)),
        "accuracy": float(accuracy_score(y, pred)),
        "balanced_accuracy": _balanced_accuracy(y, pred),
    }
    if kind == "binary":
        out["auc"] = out["advantage"] = None
        if np.unique(y).size == 2:
            out["auc"] = None if scores is None else float(roc_auc_score(y, scores))
            tpr = recall_score(y, pred, pos_label=1, zero_division=0)
            fpr = 1.0 - recall_score(y, pred, pos_label=0, zero_division=0)
            out["advantage"] = float(abs(tpr - fpr))
    return out


def primary_metric(kind: str, y: np.ndarray, pred: np.ndarray) -> float:
    """``attack_metrics(kind, y, pred)[PRIMARY_METRIC[kind]]`` alone: the searches rank every
    trial on it, and the other metrics (ROC-AUC above all) would cost several times more."""
    from sklearn.metrics import f1_score, mean_absolute_error

    if kind == "continuous":
        return float(mean_absolute_error(y, pred))
    return float(f1_score(y, pred, average="macro", zero_division=0))


def baseline_metrics(
    kind: str, y_train: np.ndarray, y_test: np.ndarray
) -> dict[str, Optional[float]]:
    """The same metrics for the attacker that ignores the embedding: it predicts the
    training split's majority class (per label for multilabel; the mean for continuous)."""
    n = y_test.shape[0]
    if kind == "continuous":
        pred = np.broadcast_to(y_train.mean(axis=0), y_test.shape)
        return attack_metrics(kind, y_test, pred)
    if kind == "multilabel":
        pred = np.broadcast_to((y_train.mean(axis=0) > 0.5).astype(y_test.dtype), y_test.shape)
        return attack_metrics(kind, y_test, pred)
    values, counts = np.unique(y_train, return_counts=True)
    majority = values[np.argmax(counts)]
    pred = np.full(n, majority, dtype=y_test.dtype)
    scores = np.full(n, float(majority == 1))
    return attack_metrics(kind, y_test, pred, scores)
