"""The audit's cost estimates order its fits as their run times do: more rows, features,
layers, width or epochs cost more; the trees cost more than the neighbour search."""

from galfast.audit.attackers import AttackerConfig, training_epochs
from galfast.audit.job_costs import classic_cost, head_cost


def test_heads_cost_more_with_every_size():
    base = dict(in_dim=20, hidden=(64, 64), out_dim=1, rows=3866, batch=256, epochs=12)
    cost = head_cost(**base)
    for key, bigger in [
        ("in_dim", 40), ("hidden", (128, 64)), ("hidden", (64, 64, 64)), ("out_dim", 4),
        ("rows", 5000), ("epochs", 13),
    ]:  # fmt: skip
        assert head_cost(**{**base, key: bigger}) > cost, key
    # Larger batches: fewer steps, each with its fixed part.
    assert head_cost(**{**base, "batch": 512}) < cost
    # A linear head still costs its steps.
    assert 0 < head_cost(**{**base, "hidden": ()}) < cost


def test_classic_costs():
    assert classic_cost("hgb", 3866, 20) > classic_cost("knn", 3866, 20) > 0
    assert classic_cost("hgb", 3866, 40) > classic_cost("hgb", 3866, 20)


def test_training_epochs_reaches_min_steps():
    config = AttackerConfig(epochs=30, batch_size=256, min_steps=500)
    assert training_epochs(config, 3866) == 32  # 16 batches an epoch
    assert training_epochs(config, 100_000) == 30
    assert training_epochs(AttackerConfig(epochs=2, batch_size=64, min_steps=0), 10) == 2
