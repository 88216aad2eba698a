r"""The chance level of every attack metric: the best score of a predictor that ignores the
embeddings. An attacker's score says the embeddings leak only where it beats this level.

Two such predictors are scored on the test split, and per metric the better is chance:

- the constant one: the training split's majority class (per label for multilabel); for a
  continuous attribute the training mean, and its median (the better constant for MAE);
- for classes (and multilabel labels), random guesses at the training split's frequencies
  :math:`q_c`, independent of the input (scikit-learn's ``DummyClassifier(strategy=
  "stratified")``), scored by their expectation.

The constant alone is no chance level for macro-F1: it scores 0 on every class but its own,
about 1/3 on a balanced binary attribute, where a coin scores 1/2.

The guesses' expectation on ``n`` test nodes with class frequencies :math:`p_c`: a node of
class c is guessed right with probability :math:`q_c`, so c has :math:`n p_c q_c` true
positives and :math:`n q_c` predictions on average, and its
:math:`F1_c = 2 TP_c / (true_c + predicted_c)` is about

.. math:: F1_c \approx \frac{2 p_c q_c}{p_c + q_c}

(the numerator's and denominator's expectations taken apart: an error of order 1/n, checked
against simulated guesses in ``tests/test_audit_chance.py``). With :math:`q = p` the macro
average is 1/C for C classes, whatever their sizes. Accuracy :math:`\sum_c p_c q_c`, the
recall :math:`q_c` of each class, the AUC 1/2 of random scores and the advantage
:math:`|q_1 - q_1| = 0` are exact expectations; the last two equal the constant's.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from galfast.audit.metrics import attack_metrics, higher_is_stronger

__all__ = ["chance_levels", "majority_metrics"]


def majority_metrics(
    kind: str, y_train: np.ndarray, y_test: np.ndarray
) -> dict[str, Optional[float]]:
    """The attack metrics of the constant predictor: the training split's majority class (per
    label for multilabel; the mean for continuous)."""
    n = y_test.shape[0]
    if kind == "continuous":
        return attack_metrics(kind, y_test, np.broadcast_to(y_train.mean(axis=0), y_test.shape))
    if kind == "multilabel":
        pred = np.broadcast_to((y_train.mean(axis=0) > 0.5).astype(y_test.dtype), y_test.shape)
        return attack_metrics(kind, y_test, pred)
    values, counts = np.unique(y_train, return_counts=True)
    majority = values[np.argmax(counts)]
    pred = np.full(n, majority, dtype=y_test.dtype)
    return attack_metrics(kind, y_test, pred, np.full(n, float(majority == 1)))


def _f1(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """2 p q / (p + q), 0 where both are 0 (scikit-learn's zero_division=0)."""
    total = p + q
    return np.divide(2 * p * q, total, out=np.zeros_like(total), where=total > 0)


def _class_guesses(y_train: np.ndarray, y_test: np.ndarray) -> dict[str, float]:
    """The expected macro-F1, accuracy and balanced accuracy of the random guesses."""
    classes = np.union1d(y_train, y_test)
    p = np.bincount(np.searchsorted(classes, y_test), minlength=classes.size) / y_test.size
    q = np.bincount(np.searchsorted(classes, y_train), minlength=classes.size) / y_train.size
    # Macro-F1 averages over the classes true or predicted: one absent from the test split
    # counts (with F1 0) when it is guessed at least once.
    counted = np.where(p > 0, 1.0, 1.0 - (1.0 - q) ** y_test.size)
    present = p > 0
    return {
        "macro_f1": float(_f1(p, q).sum() / counted.sum()),
        "accuracy": float(p @ q),
        "balanced_accuracy": float(q[present].mean()),
    }


def _label_guesses(y_train: np.ndarray, y_test: np.ndarray) -> dict[str, float]:
    """The expected micro- and macro-F1 and exact-match accuracy of guessing each label
    positive at its training frequency."""
    if y_test.ndim == 1 or y_test.shape[1] == 1:  # one label is scored as classes 0 and 1
        guesses = _class_guesses(y_train.ravel(), y_test.ravel())
        accuracy = guesses["accuracy"]
        return {"micro_f1": accuracy, "macro_f1": guesses["macro_f1"], "accuracy": accuracy}
    p, q = y_test.mean(axis=0), y_train.mean(axis=0)
    right = np.where(y_test != 0, q, 1.0 - q)  # P(guess of label j is right) per node
    # micro-F1 pools the labels' counts: 2 sum_j p_j q_j / (sum_j p_j + sum_j q_j)
    pooled = p.sum() + q.sum()
    return {
        "micro_f1": float(2 * (p @ q) / pooled) if pooled else 0.0,
        "macro_f1": float(np.mean(_f1(p, q))),
        "accuracy": float(np.mean(np.prod(right, axis=1))),
    }


def _best(name: str, values: list[Optional[float]]) -> Optional[float]:
    known = [v for v in values if v is not None]
    if not known:
        return None
    return max(known) if higher_is_stronger(name) else min(known)


def chance_levels(
    kind: str, y_train: np.ndarray, y_test: np.ndarray
) -> tuple[dict[str, Optional[float]], dict[str, Optional[float]]]:
    """``(chance, majority)``: per attack metric, the best score of the predictors that ignore
    the embeddings, and the constant predictor's (:func:`majority_metrics`). A metric that is
    undefined on the test split (macro-F1 with one class there) is None in both."""
    majority = majority_metrics(kind, y_train, y_test)
    if kind == "continuous":
        median = np.broadcast_to(np.median(y_train, axis=0), y_test.shape)
        other = attack_metrics(kind, y_test, median.astype(y_test.dtype))
    elif kind == "multilabel":
        other = _label_guesses(y_train, y_test)
    else:
        other = _class_guesses(y_train, y_test)
    chance = {
        name: None if value is None else _best(name, [value, other.get(name)])
        for name, value in majority.items()
    }
    return chance, majority
