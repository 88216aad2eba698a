"""What the audit cannot measure is reported as missing, not as a score: a class the test
split lacks (warned, class averages over one class left undefined) and the interval of a
single seed."""

import json
import warnings

import numpy as np
import pytest
import torch

from galfast import SensitiveAttribute, audit
from galfast.audit.metrics import attack_metrics
from galfast.cli.run import worst_case_line

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _audit(z, attribute, seeds=1):
    """The fast node attack, trained on nodes 0-79 and scored on nodes 80-99."""
    return audit(
        z,
        attribute,
        train_idx=torch.arange(80),
        test_idx=torch.arange(80, 100),
        attacks=("node",),
        seeds=seeds,
        epochs=1,
        min_steps=5,
    )


def _rare():
    """Class 1 on 2 of 100 nodes, both attacker-training nodes: the test split (nodes 80-99)
    holds class 0 alone."""
    a = torch.zeros(100, dtype=torch.long)
    a[[3, 7]] = 1
    z = torch.randn(100, 4, generator=torch.Generator().manual_seed(1))
    return _audit(z, SensitiveAttribute("a", "binary", a), seeds=2)


def test_a_class_missing_from_the_test_split_is_warned_and_left_unscored():
    with pytest.warns(UserWarning, match=r"a: no test node .* class\(es\) \[1\].*undefined"):
        report = _rare()
    # Every test node has class 0: an attacker that always says 0 is right, which says
    # nothing about telling the classes apart; before, it printed macro_f1 1.000.
    for cell in report.results:
        assert set(cell.metrics) == {"accuracy"}
        assert "macro_f1" not in cell.baseline and "macro_f1" not in cell.majority
    assert "macro_f1 undefined (the test split holds one class of a)" in str(report)
    case = report.to_dict()["worst_case"][0]
    assert case["mean"] is None and case["ci"] is None and case["chance"] is None
    json.loads(report.to_json())


def test_an_absent_class_among_several_is_warned_but_scored():
    a = torch.arange(100) % 2
    a[[3, 7]] = 2  # class 2 on two training nodes only
    z = torch.randn(100, 4, generator=torch.Generator().manual_seed(2))
    with pytest.warns(UserWarning, match=r"class\(es\) \[2\].*over the 2 classes"):
        report = _audit(z, SensitiveAttribute("a", "categorical", a))
    assert "macro_f1" in report.worst_case("a").metrics


def test_no_warning_when_the_test_split_holds_every_class():
    a = torch.arange(100) % 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        z = torch.randn(100, 4, generator=torch.Generator().manual_seed(3))
        _audit(z, SensitiveAttribute("a", "categorical", a))


def test_one_class_metrics_are_undefined():
    y = np.zeros(5, dtype=np.int64)
    m = attack_metrics("binary", y, y, np.zeros(5))
    assert m == {
        "macro_f1": None,
        "accuracy": 1.0,
        "balanced_accuracy": None,
        "auc": None,
        "advantage": None,
    }
    assert attack_metrics("categorical", y + 2, np.array([2, 2, 1, 2, 2]))["macro_f1"] is None


def test_one_seed_has_no_interval():
    a = torch.arange(100) % 2
    z = torch.randn(100, 4, generator=torch.Generator().manual_seed(4))
    report = _audit(z, SensitiveAttribute("a", "binary", a))
    worst = report.worst_case("a")
    assert worst.metrics["macro_f1"].ci is None
    text = str(report)
    assert "(95% CI n/a over 1 seed(s))" in text and "mean (no interval) over 1 seed" in text
    case = report.to_dict()["worst_case"][0]
    assert case["ci"] is None
    line = worst_case_line(case)
    assert "(95% CI n/a; chance 0.500; majority 0.333; fast audit)" in line
