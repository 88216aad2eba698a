"""galfast.audit: metrics, baselines, intervals, report, bounds and bad inputs."""

import json
import math

import numpy as np
import pytest
import torch
from scipy import stats
from sklearn.metrics import balanced_accuracy_score

from galfast import Graph, SensitiveAttribute, audit
from galfast.audit import summarize, tradeoff_bound
from galfast.audit.chance import majority_metrics
from galfast.audit.metrics import attack_metrics

# Tiny tensors: one thread avoids oversubscribing shared 2-core machines.
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _split(n, seed=0):
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    return order[: n * 7 // 10], order[n * 7 // 10 :]


def _leaky(n=200, seed=0):
    """Embeddings that reveal a binary A almost perfectly."""
    gen = torch.Generator().manual_seed(seed)
    a = torch.randint(2, (n,), generator=gen)
    z = torch.cat([3.0 * (2 * a.float() - 1).view(-1, 1), torch.randn(n, 3, generator=gen)], 1)
    return z, a


def test_leaky_embeddings_are_caught_by_every_family():
    z, a = _leaky()
    train, test = _split(200)
    report = audit(
        z,
        SensitiveAttribute("a", "binary", a),
        train_idx=train,
        test_idx=test,
        attacks=("node",),
        seeds=1,
    )
    for family in ("mlp", "linear"):
        cell = report.result("a", "node", family)
        assert cell.metrics["macro_f1"].mean > 0.95
        assert cell.metrics["auc"].mean > 0.99
        assert cell.metrics["advantage"].mean > 0.9
        assert cell.baseline["macro_f1"] == pytest.approx(0.5, abs=0.05)  # chance: a coin
        assert cell.majority["macro_f1"] < 0.4
        assert cell.n_test == 60 and cell.pair_failures == 0


def test_independent_embeddings_stay_near_chance():
    gen = torch.Generator().manual_seed(1)
    z = torch.randn(300, 4, generator=gen)
    a = torch.randint(2, (300,), generator=gen)
    train, test = _split(300)
    report = audit(
        z,
        SensitiveAttribute("a", "binary", a),
        train_idx=train,
        test_idx=test,
        attacks=("node",),
        seeds=2,
        min_steps=100,
    )
    worst = report.worst_case("a")
    assert worst.metrics["macro_f1"].mean < 0.65
    assert worst.metrics["advantage"].mean < 0.3
    assert abs(worst.metrics["auc"].mean - 0.5) < 0.15


def test_binary_metrics_match_scikit_learn_and_hand_values():
    y = np.array([1, 1, 1, 0, 0, 0, 0, 0])
    pred = np.array([1, 1, 0, 0, 0, 0, 1, 1])
    scores = np.array([0.9, 0.8, 0.4, 0.1, 0.2, 0.3, 0.6, 0.7])
    m = attack_metrics("binary", y, pred, scores)
    assert m["accuracy"] == pytest.approx(5 / 8)
    assert m["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(y, pred))
    # TPR = 2/3, FPR = 2/5 -> advantage 4/15 = |2 * balanced accuracy - 1|.
    assert m["advantage"] == pytest.approx(4 / 15)
    assert m["advantage"] == pytest.approx(abs(2 * m["balanced_accuracy"] - 1))
    # Ranking AUC: of the 15 (positive, negative) pairs, 13 are ordered correctly.
    assert m["auc"] == pytest.approx(13 / 15)
    # F1: class 1 has P = 2/4, R = 2/3 -> 4/7; class 0 has P = 3/4, R = 3/5 -> 2/3.
    assert m["macro_f1"] == pytest.approx((4 / 7 + 2 / 3) / 2)


def test_balanced_accuracy_ignores_predicted_classes_absent_from_the_truth():
    y = np.array([0, 0, 1, 1])
    pred = np.array([0, 2, 1, 1])
    m = attack_metrics("categorical", y, pred)
    assert m["balanced_accuracy"] == pytest.approx(0.75)  # recall 1/2 and 1 over classes {0, 1}


def test_majority_baselines():
    b = majority_metrics("binary", np.array([1, 1, 0]), np.array([1, 1, 0, 0]))
    assert b["accuracy"] == 0.5 and b["macro_f1"] == pytest.approx(1 / 3)
    assert b["auc"] == 0.5 and b["balanced_accuracy"] == 0.5 and b["advantage"] == 0.0
    c = majority_metrics("continuous", np.array([[1.0], [3.0]]), np.array([[2.0], [5.0]]))
    assert c["mae"] == pytest.approx(1.5) and c["rmse"] == pytest.approx(math.sqrt(4.5))
    m = majority_metrics("multilabel", np.array([[1, 0], [1, 1], [1, 0]]), np.array([[1, 1]]))
    assert m["micro_f1"] == pytest.approx(2 / 3)  # predicts {label 0}: P = 1, R = 1/2


def test_summaries_use_student_t_intervals():
    values = [0.61, 0.64, 0.58, 0.66, 0.6]
    s = summarize(values)
    low, high = stats.t.interval(
        0.95, len(values) - 1, loc=np.mean(values), scale=stats.sem(values)
    )
    assert s.mean == pytest.approx(np.mean(values))
    assert s.ci == pytest.approx((low, high))
    one = summarize([0.5])
    assert one.half_width is None and one.ci is None  # one seed: no interval
    with pytest.raises(ValueError):
        summarize([])


def test_report_prints_serialises_and_ranks():
    z, a = _leaky()
    z = torch.cat([z[:, :1] * 0.2 + torch.randn(200, 1), z[:, 1:]], 1)  # partly leaky
    train, test = _split(200)
    report = audit(
        z,
        SensitiveAttribute("gender", "binary", a),
        train_idx=train,
        test_idx=test,
        attacks=("node",),
        seeds=3,
        min_steps=50,
    )
    data = json.loads(report.to_json())
    assert data["seeds"] == 3
    assert {r["attacker"] for r in data["results"]} == {"mlp", "linear"}
    first = data["results"][0]
    assert set(first["metrics"]) == {
        "macro_f1",
        "accuracy",
        "balanced_accuracy",
        "auc",
        "advantage",
    }
    assert len(first["metrics"]["macro_f1"]["values"]) == 3
    (head,) = report.headline()
    assert head.strength() == max(r.strength() for r in report.results)
    assert data["headline"] == [
        {"attribute": "gender", "attack": "node", "attacker": head.attacker}
    ]
    text = str(report)
    assert "gender (binary)" in text and "balanced_accuracy" in text
    assert f"{head.attacker}*" in text
    assert "equals balanced_accuracy" in text


def test_categorical_known_on_a_subset():
    gen = torch.Generator().manual_seed(2)
    n = 240
    a = torch.randint(3, (n,), generator=gen)
    z = torch.nn.functional.one_hot(a, 3).float() * 2 + torch.randn(n, 3, generator=gen)
    known = torch.arange(n) % 2 == 0
    train, test = _split(n)
    report = audit(
        z,
        SensitiveAttribute("age", "categorical", a, mask=known),
        train_idx=train,
        test_idx=test,
        attacks=("node",),
        attackers=("linear",),
        seeds=1,
    )
    cell = report.result("age", "node")
    assert cell.n_test == int(known[test].sum()) and cell.n_train == int(known[train].sum())
    assert "auc" not in cell.metrics and "advantage" not in cell.metrics
    assert cell.metrics["macro_f1"].mean > 0.7
    assert cell.metrics["macro_f1"].half_width is None


def test_continuous_and_multilabel_attributes():
    gen = torch.Generator().manual_seed(3)
    n = 200
    alpha = torch.randn(n, generator=gen) * 5 + 10
    labels = (torch.rand(n, 3, generator=gen) < 0.5).long()
    z = torch.cat([alpha.view(-1, 1) / 5, labels.float() * 2, torch.randn(n, 2, generator=gen)], 1)
    train, test = _split(n)
    report = audit(
        z,
        [
            SensitiveAttribute("alpha", "continuous", alpha),
            SensitiveAttribute("types", "multilabel", labels),
        ],
        train_idx=train,
        test_idx=test,
        attacks=("node",),
        seeds=1,
    )
    reg = report.result("alpha", "node")
    assert set(reg.metrics) == {"mae", "rmse"}
    assert reg.metrics["mae"].mean < 0.5 * reg.baseline["mae"]  # the mean or median's MAE
    assert report.worst_case("alpha").metrics["mae"].mean == min(
        r.metrics["mae"].mean for r in report.results if r.attribute == "alpha"
    )
    sets = report.result("types", "node")
    assert set(sets.metrics) == {"micro_f1", "macro_f1", "accuracy"}
    assert sets.metrics["micro_f1"].mean > 0.9
    assert "alpha (continuous)" in str(report)


def test_tradeoff_bound_hand_computed():
    bound = tradeoff_bound(
        "a",
        torch.tensor([0, 0, 1, 1]),
        torch.tensor([1, 1, 0, 1]),
        radius=2.0,
        advantage=0.1,
        lipschitz=0.5,
    )
    assert bound.delta_y_given_a == pytest.approx(0.5) and bound.alpha == pytest.approx(0.5)
    assert bound.error_bound_at_zero_advantage == pytest.approx(0.25)
    # min(alpha, 1 - alpha) * (delta - 2 R C Adv) = 0.5 * (0.5 - 0.2)
    assert bound.error_bound == pytest.approx(0.15)
    with pytest.raises(ValueError, match="binary"):
        tradeoff_bound("a", torch.tensor([0, 2]), torch.tensor([1, 0]), radius=1.0)
    with pytest.raises(ValueError, match="both"):
        tradeoff_bound("a", torch.tensor([1, 1]), torch.tensor([1, 0]), radius=1.0)
    a, y = torch.tensor([0, 1]), torch.tensor([1, 0])
    # A negative or NaN C gave a bound; probabilities were truncated to class 0.
    for bad in (-1.0, float("nan"), float("inf"), True):
        with pytest.raises(ValueError, match="lipschitz must be (a finite number|>= 0), got"):
            tradeoff_bound("a", a, y, radius=1.0, advantage=0.1, lipschitz=bad)
    with pytest.raises(ValueError, match="y must hold integer class labels, got 0.5"):
        tradeoff_bound("a", a, torch.tensor([0.5, 0.25]), radius=1.0)
    assert tradeoff_bound("a", a.float(), y.double(), radius=1.0).delta_y_given_a == 1.0


def test_audit_reports_the_bound_when_task_labels_are_given():
    z, a = _leaky()
    y = a.clone()
    y[::4] = 1 - y[::4]
    y[::7] = -1  # unknown task labels are skipped
    train, test = _split(200)
    report = audit(
        z,
        SensitiveAttribute("a", "binary", a),
        train_idx=train,
        test_idx=test,
        attacks=("node",),
        attackers=("linear",),
        seeds=1,
        task_labels=y,
        task_lipschitz=1.0,
    )
    (bound,) = report.tradeoff
    both = y >= 0
    expected = tradeoff_bound("a", a[both], y[both], radius=float(z.norm(dim=1).max()))
    assert bound.delta_y_given_a == pytest.approx(expected.delta_y_given_a)
    assert bound.n == int(both.sum())
    assert bound.advantage == pytest.approx(report.result("a", "node").metrics["advantage"].mean)
    assert bound.error_bound is not None
    assert "trade-off (a)" in str(report)
    json.loads(report.to_json())


def test_audit_is_reproducible():
    z, a = _leaky(seed=4)
    z = z + torch.randn(z.shape, generator=torch.Generator().manual_seed(0)) * 3
    train, test = _split(200)
    attr = SensitiveAttribute("a", "binary", a)
    kwargs = dict(train_idx=train, test_idx=test, attacks=("node",), seeds=2, seed=5, min_steps=50)
    first = audit(z, attr, **kwargs)
    again = audit(z, attr, **kwargs)
    assert first.to_dict() == again.to_dict()


def test_neighbour_attack_finds_what_the_node_attack_cannot():
    # Users (0..U-1) have uninformative embeddings; each links to items whose embeddings
    # encode the item's group, which matches the user's attribute.
    gen = torch.Generator().manual_seed(5)
    num = 300
    users, items = torch.arange(num), torch.arange(num, 2 * num)
    a = torch.randint(2, (num,), generator=gen)
    item_group = torch.arange(num) % 2
    src = users.repeat_interleave(3)
    pick = torch.randint(num // 2, (src.numel(),), generator=gen)
    dst = num + 2 * pick + a[src]  # an item of the user's group
    graph = Graph.from_edge_index(torch.stack([src, dst]), 2 * num, symmetrize=True)
    z = torch.randn(2 * num, 3, generator=gen)
    z[items, 0] += 3.0 * (2 * item_group.float() - 1)
    attr = SensitiveAttribute("a", "binary", a, index=users)
    train, test = _split(num)
    report = audit(
        z,
        attr,
        graph=graph,
        attacks=("node", "neighbor", "nhop:2"),
        seeds=2,
        train_idx=train,
        test_idx=test,
    )
    node = report.result("a", "node").metrics["macro_f1"].mean
    neighbour = report.result("a", "neighbor").metrics["macro_f1"].mean
    assert node < 0.7 and neighbour > 0.9
    # Two hops from a user land on a user or back on an item: weaker than one hop.
    assert report.result("a", "nhop:2").metrics["macro_f1"].mean < neighbour


def test_bad_audit_inputs():
    z, a = _leaky(n=20)
    attr = SensitiveAttribute("a", "binary", a)
    train, test = torch.arange(10), torch.arange(10, 20)
    cases = [
        (dict(train_idx=torch.arange(12)), "overlap"),
        (dict(attacks=("node", "neighbor")), "need graph="),
        (
            dict(
                attacks=("node", "nhop:2"), graph=Graph.from_edge_index(torch.tensor([[0], [1]]), 5)
            ),
            "5 nodes",
        ),
        (dict(attacks=("cousin",)), "unknown pairing"),
        (dict(attacks=()), "non-empty"),
        (dict(attacks=("node", "node")), "distinct"),
        (dict(attackers=("svm",)), "attackers"),
        (dict(seeds=0), "seeds"),
        (dict(train_idx=torch.tensor([0, 25])), "outside"),
        (dict(test_idx=torch.ones(7, dtype=torch.bool)), "mask"),
        (dict(test_idx=torch.tensor([0.5])), "integer"),
        (dict(epochs=0), "epochs"),
        (dict(min_steps=-1), "min_steps"),
        (dict(lr=float("nan")), "lr must be a finite"),  # NaN passed `lr <= 0`, reached Adam
        (dict(lr=float("inf")), "lr must be a finite"),
        (dict(epochs=1.5), "epochs must be an int"),  # a raw TypeError in range()
        (dict(batch_size=True), "batch_size must be an int"),
        # Seeds outside [0, 2**64) aliased others (-1 ran as 2**64 - 1); 1.5 ran as 1.
        (dict(seed=-1), r"seed must (be an int,|be >= 0,|lie in \[0, 2\*\*64\),)"),
        (dict(seed=1.5), r"seed must (be an int,|be >= 0,|lie in \[0, 2\*\*64\),)"),
        (dict(seed=2**64), r"seed must (be an int,|be >= 0,|lie in \[0, 2\*\*64\),)"),
        (dict(seed=False), r"seed must (be an int,|be >= 0,|lie in \[0, 2\*\*64\),)"),
        (dict(task_labels=a.float(), task_lipschitz=-1.0), "task_lipschitz must be"),
        (dict(task_labels=a.float(), task_lipschitz=float("nan")), "task_lipschitz must be"),
        # Probabilities were cast to class 0 by .long(): a bound from made-up labels.
        (dict(task_labels=torch.full((20,), 0.7)), "task_labels must hold integer"),
        (dict(task_labels=torch.full((20,), float("nan"))), "task_labels must hold integer"),
        (dict(embeddings=torch.full((20, 2), float("nan"))), "NaN"),
        (dict(embeddings=torch.zeros(20)), "num_nodes, D"),
        (dict(embeddings=torch.zeros(20, 2, dtype=torch.long)), "floating"),
        (
            dict(sensitive=SensitiveAttribute("a", "binary", a[:10], index=torch.arange(10))),
            "no training or no test node",
        ),
        (dict(sensitive=SensitiveAttribute("a", "binary", a[:5])), "5 rows"),
        (dict(task_labels=torch.zeros(7)), "task_labels"),
        (dict(walk_mode="lazy"), "walk_mode"),
    ]
    for override, match in cases:
        call = dict(
            embeddings=z,
            sensitive=attr,
            train_idx=train,
            test_idx=test,
            attacks=("node",),
            seeds=1,
            epochs=1,
        )
        call.update(override)
        with pytest.raises(ValueError, match=match):
            audit(**call)


def test_half_precision_embeddings_are_audited_as_float32():
    # float16 failed with a misleading "attacker's scores hold NaN", bfloat16 a raw TypeError.
    z, a = _leaky(n=40)
    z = z.half().float()  # values exact in float16 (and nearly so in bfloat16)
    kwargs = dict(train_idx=torch.arange(28), test_idx=torch.arange(28, 40), attacks=("node",))
    attr = SensitiveAttribute("a", "binary", a)
    for dtype in (torch.float16, torch.bfloat16):
        got = audit(z.to(dtype), attr, seeds=1, epochs=1, min_steps=5, workers=1, **kwargs)
        want = audit(z.to(dtype).float(), attr, seeds=1, epochs=1, min_steps=5, workers=1, **kwargs)
        assert got.to_json() == want.to_json()


def test_an_attribute_edited_after_construction_is_refused():
    z, a = _leaky(n=20)
    values = a.clone()
    attr = SensitiveAttribute("a", "binary", values)
    values[0] = 7  # binary: the attacker's metrics would be scored against a class 7
    kwargs = dict(train_idx=torch.arange(10), test_idx=torch.arange(10, 20), attacks=("node",))
    with pytest.raises(ValueError, match="SensitiveAttribute 'a'.values was modified in place"):
        audit(z, attr, seeds=1, epochs=1, **kwargs)
    # An edit the version counter misses (through .data) still may not reach the metrics.
    alpha = SensitiveAttribute("alpha", "continuous", torch.randn(20))
    alpha.values.data[3] = float("nan")
    with pytest.raises(ValueError, match="alpha: the known values hold NaN"):
        audit(z, alpha, seeds=1, epochs=1, **kwargs)


@pytest.mark.cuda
def test_audit_runs_on_cuda_embeddings():
    z, a = _leaky()
    train, test = _split(200)
    report = audit(
        z.cuda(),
        SensitiveAttribute("a", "binary", a.cuda()),
        train_idx=train,
        test_idx=test,
        attacks=("node",),
        seeds=1,
    )
    assert report.worst_case("a").metrics["macro_f1"].mean > 0.95


def test_audit_split_holds_out_a_seeded_fifth_of_the_labelled_nodes():
    from galfast.audit import audit_split

    nodes = torch.arange(10, 60)
    train_idx, test_idx = audit_split(nodes, seed=3)
    assert test_idx.numel() == 10 and train_idx.numel() == 40
    assert sorted(torch.cat([train_idx, test_idx]).tolist()) == nodes.tolist()
    again, _ = audit_split(nodes, seed=3)
    other, _ = audit_split(nodes, seed=4)
    assert torch.equal(again, train_idx) and not torch.equal(other, train_idx)
    assert audit_split(nodes[:2], seed=0)[1].numel() == 1  # at least one test node
    with pytest.raises(ValueError, match="test_fraction"):
        audit_split(nodes, seed=0, test_fraction=1.0)
    for seed in (-1, 1.5, 2**64):
        with pytest.raises(
            ValueError, match=r"seed must (be an int,|be >= 0,|lie in \[0, 2\*\*64\),)"
        ):
            audit_split(nodes, seed=seed)
