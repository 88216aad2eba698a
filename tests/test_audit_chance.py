"""The audit's chance level: the best score of a predictor that ignores the embeddings, its
formula for random guesses checked against simulated guesses, and where the report, the
JSON and the run summaries state it."""

import numpy as np
import pytest
import torch

from galfast import SensitiveAttribute, audit
from galfast.audit.chance import chance_levels
from galfast.audit.metrics import attack_metrics
from galfast.cli.summary import summarize_runs

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _simulated(kind, y_train, y_test, trials=4000, seed=0):
    """Mean metrics of guesses drawn at the training frequencies, independent of the input
    (scikit-learn's DummyClassifier(strategy="stratified"))."""
    gen = np.random.default_rng(seed)
    if kind == "multilabel":
        q = y_train.mean(axis=0)
        draws = [(gen.random(y_test.shape) < q).astype(np.int64) for _ in range(trials)]
    else:
        classes, counts = np.unique(y_train, return_counts=True)
        draws = gen.choice(classes, size=(trials, y_test.size), p=counts / counts.sum())
    scored = [attack_metrics(kind, y_test, guess) for guess in draws]
    names = [name for name, value in scored[0].items() if value is not None]
    return {name: float(np.mean([m[name] for m in scored])) for name in names}


CLASS_CASES = [
    # (kind, training class sizes, test class sizes, tolerance); the formula's error is of
    # order 1/n (below 0.003 at n >= 90, 0.008 at n = 20), the simulation's about 0.002.
    ("binary", [240, 240], [60, 60], 0.01),
    ("binary", [400, 80], [100, 20], 0.01),
    ("categorical", [200, 100, 50, 10], [50, 25, 12, 3], 0.01),
    ("categorical", [30, 30, 30], [10, 5, 5], 0.025),
    ("categorical", [60, 39, 1], [18, 2, 0], 0.025),  # a class absent from the test split
]


@pytest.mark.parametrize("kind, train_sizes, test_sizes, tol", CLASS_CASES)
def test_random_guess_formula_matches_simulated_guesses(kind, train_sizes, test_sizes, tol):
    classes = np.arange(len(train_sizes))
    y_train, y_test = np.repeat(classes, train_sizes), np.repeat(classes, test_sizes)
    simulated = _simulated(kind, y_train, y_test)
    chance, majority = chance_levels(kind, y_train, y_test)
    for name in ("macro_f1", "accuracy", "balanced_accuracy"):
        # The chance level is the better of the guesses' expectation and the constant.
        expected = max(simulated[name], majority[name])
        assert chance[name] == pytest.approx(expected, abs=tol), name


def test_label_guess_formula_matches_simulated_guesses():
    gen = np.random.default_rng(3)
    rates = np.array([0.5, 0.2, 0.05])
    y_train = (gen.random((400, 3)) < rates).astype(np.int64)
    y_test = (gen.random((100, 3)) < rates).astype(np.int64)
    simulated = _simulated("multilabel", y_train, y_test)
    chance, majority = chance_levels("multilabel", y_train, y_test)
    for name in ("micro_f1", "macro_f1", "accuracy"):
        expected = max(simulated[name], majority[name])
        assert chance[name] == pytest.approx(expected, abs=0.01), name


def test_macro_f1_chance_is_one_over_the_classes_not_the_majority_class():
    y_train = np.repeat([0, 1, 2], [500, 300, 200])
    y_test = np.repeat([0, 1, 2], [50, 30, 20])
    chance, majority = chance_levels("categorical", y_train, y_test)
    assert chance["macro_f1"] == pytest.approx(1 / 3)  # guesses at q = p score 1/C
    assert majority["macro_f1"] == pytest.approx(2 * 0.5 / 1.5 / 3)  # 2/9: one class's F1
    assert chance["balanced_accuracy"] == pytest.approx(1 / 3)
    assert chance["accuracy"] == majority["accuracy"] == 0.5


def test_constant_levels():
    chance, majority = chance_levels("binary", np.array([1, 1, 0]), np.array([1, 1, 0, 0]))
    assert majority["macro_f1"] == pytest.approx(1 / 3) and majority["accuracy"] == 0.5
    # Guesses at q = (1/3, 2/3) on p = (1/2, 1/2): F1 2pq / (p + q) = 2/5 and 4/7.
    assert chance["macro_f1"] == pytest.approx((2 / 5 + 4 / 7) / 2)
    assert chance["auc"] == majority["auc"] == 0.5 and chance["advantage"] == 0.0
    # Continuous: the mean predictor, and the median's where it scores better.
    chance, mean = chance_levels(
        "continuous", np.array([[1.0], [3.0], [10.0]]), np.array([[2.0], [5.0]])
    )
    assert mean["rmse"] == pytest.approx(np.sqrt(((2 - 14 / 3) ** 2 + (5 - 14 / 3) ** 2) / 2))
    assert chance["rmse"] == pytest.approx(np.sqrt(2.5))  # the median 3 errs by 1 and 2
    assert chance["mae"] == mean["mae"] == pytest.approx(1.5)


def _noise_report(seeds=2):
    """Pure-noise embeddings and a balanced binary attribute, balanced in both splits:
    nothing leaks, a coin scores macro-F1 1/2 and the majority class 1/3."""
    z = torch.randn(400, 8, generator=torch.Generator().manual_seed(7))
    a = torch.arange(400) % 2
    return audit(
        z,
        SensitiveAttribute("a", "binary", a),
        train_idx=torch.arange(80, 400),
        test_idx=torch.arange(80),
        attacks=("node",),
        seeds=seeds,
        epochs=2,
        min_steps=20,
    )


def test_the_report_compares_attacks_with_chance_and_names_the_majority():
    report = _noise_report()
    worst = report.worst_case("a")
    assert worst.baseline["macro_f1"] == pytest.approx(0.5)  # a coin, not the majority's 1/3
    assert worst.majority["macro_f1"] == pytest.approx(1 / 3)
    text = str(report)
    chance, majority = worst.baseline["macro_f1"], worst.majority["macro_f1"]
    assert f"vs chance {chance:.3f} (majority {majority:.3f})" in text
    assert "chance macro_f1" in text and "majority baseline" not in text
    case = report.to_dict()["worst_case"][0]
    assert case["chance"] == chance and case["majority"] == majority


def _record(report):
    """A run record as galfast run stores one (experiments.runner)."""
    head = report.headline()
    return {
        "task_metric": "auc",
        "task": {"auc": 0.9},
        "attack": {
            r.attack: {"attacker": r.attacker, **{k: m.mean for k, m in r.metrics.items()}}
            for r in head
        },
        "baseline": {r.attack: r.baseline for r in head},
        "audit": report.to_dict(),
    }


def test_run_summaries_record_chance_and_majority_apart():
    record = _record(_noise_report())
    cells = summarize_runs([record])["attack"]["node"]
    assert cells["chance_macro_f1"] == pytest.approx(0.5)
    assert cells["majority_macro_f1"] == pytest.approx(1 / 3)
    # A record written before: its baseline was the majority class's, and no chance level.
    for cell in record["audit"]["results"]:
        del cell["majority"]
    cells = summarize_runs([record])["attack"]["node"]
    assert cells["chance_macro_f1"] is None
    assert cells["majority_macro_f1"] == record["baseline"]["node"]["macro_f1"]
