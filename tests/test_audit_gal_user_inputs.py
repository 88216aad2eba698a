"""galfast.audit and galfast.gal on odd but legal inputs a demanding user passes: each test
failed before its fix (a raw library error or a wrong number) and checks the value now."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from galfast import SensitiveAttribute
from galfast.audit import AttackResult, AuditReport, audit, audit_split
from galfast.audit.metrics import PRIMARY_METRIC, attack_metrics
from galfast.audit.search import validation_split
from galfast.audit.stats import summarize

pytestmark = pytest.mark.usefixtures("one_torch_thread")

N = 30
TINY = dict(
    train_idx=torch.arange(20),
    test_idx=torch.arange(20, N),
    attacks=("node",),
    attackers=("linear",),
    seeds=1,
    epochs=1,
    min_steps=20,
    workers=1,
)


def _embeddings() -> torch.Tensor:
    return torch.randn(N, 4, generator=torch.Generator().manual_seed(0))


def _mae(attr: SensitiveAttribute) -> float:
    return audit(_embeddings(), attr, **TINY).result(attr.name, "node").metrics["mae"].mean


@pytest.mark.parametrize("kind", ["continuous", "multilabel"])
def test_bfloat16_attribute_values_are_audited_as_float32(kind):
    # The attribute accepted bfloat16 values, then the audit failed in numpy ("Got unsupported
    # ScalarType BFloat16"); embeddings of that dtype were already read as float32.
    gen = torch.Generator().manual_seed(1)
    values = torch.randint(0, 2, (N, 2), generator=gen).float()
    if kind == "continuous":
        values = values + torch.randn(N, 2, generator=gen)
    reference = SensitiveAttribute("a", kind, values.bfloat16().float())
    half = SensitiveAttribute("a", kind, values.bfloat16())
    expected = audit(_embeddings(), reference, **TINY).results[0].metrics
    got = audit(_embeddings(), half, **TINY).results[0].metrics
    assert {k: v.mean for k, v in got.items()} == {k: v.mean for k, v in expected.items()}


@pytest.mark.parametrize(
    "values, kind",
    [(torch.ones(N, 2).long(), "multilabel"), (torch.ones(N, 2), "continuous")],
)
def test_an_attribute_no_named_attacker_handles_is_refused(values, kind):
    # The trees take one target column: with attackers=["hgb"] alone these attributes were
    # skipped, and the report said "no results" (or left them out) as if nothing leaked.
    attr = SensitiveAttribute("a", kind, values)
    with pytest.raises(ValueError, match="a: no attacker in \\['hgb'\\] handles a " + kind):
        audit(_embeddings(), attr, **{**TINY, "attackers": ["hgb"]})


def test_a_held_out_share_counts_the_fraction_as_written():
    # 0.7 * 90 is 62.99999999999999 in floats: 62 of 90 nodes were held out, not 63.
    _, test = audit_split(torch.arange(90), 0, test_fraction=0.7)
    _, val = validation_split(90, 0.7, seed=0)
    assert (test.numel(), val.numel()) == (63, 63)


def test_the_default_share_holds_out_what_it_always_did():
    # The recorded runs used 0.2: the exact count must keep every one of their splits.
    for n in range(2, 2000):
        assert audit_split(torch.arange(n), 0)[1].numel() == max(1, int(0.2 * n))


@pytest.mark.parametrize(
    "kind, values, interval",
    [
        ("binary", [0.95, 1.0], "0.657..1.000"),  # the t interval ran to 1.293
        ("continuous", [0.02, 0.3], "0.000..1.939"),  # and down to -1.619
    ],
)
def test_the_worst_case_interval_stays_within_the_metrics_range(kind, values, interval):
    summary = summarize(values)
    primary = PRIMARY_METRIC[kind]
    cell = AttackResult("a", kind, "node", "mlp", {primary: summary}, {}, 10.0, 5.0, 0.0)
    report = AuditReport([cell], seeds=2)
    assert f"95% CI {interval} over 2 seed(s)" in report.describe_worst_case(cell)
    low, high = report.to_dict()["worst_case"][0]["ci"]
    assert f"{low:.3f}..{high:.3f}" == interval


def test_continuous_metrics_pair_a_flat_target_with_a_column_of_predictions():
    # [n] against [n, 1] broadcast to [n, n]: the MAE of every target with every prediction.
    y, pred = np.array([0.0, 1.0, 2.0]), np.array([[0.0], [1.0], [2.5]])
    assert attack_metrics("continuous", y, pred) == attack_metrics("continuous", y, pred[:, 0])
    assert attack_metrics("continuous", y, pred)["mae"] == pytest.approx(0.5 / 3)
    with pytest.raises(ValueError, match=r"2 column\(s\) for 1 target column"):
        attack_metrics("continuous", y, np.zeros((3, 2)))
