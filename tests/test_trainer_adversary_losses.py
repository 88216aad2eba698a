"""Adversary losses: TV per attribute kind, the Wasserstein critic gap, weight clipping."""

import pytest
import torch
import torch.nn.functional as F

from galfast.gal.adversary_losses import check_outputs
from galfast.train import adversary_loss, clip_weights, tv_loss, wasserstein_gap


def test_wasserstein_categorical_uses_class_conditional_means():
    # pbar_0 = mean of column 0 over the class-0 rows = (1 + 3) / 2 = 2; pbar_1 = 5 -> gap 3.
    scores = torch.tensor([[1.0, 0.0], [3.0, 0.0], [0.0, 5.0]])
    classes = torch.tensor([0, 0, 1])
    assert wasserstein_gap(scores, classes, "categorical").item() == pytest.approx(3.0)
    # Averaging each column over all rows (the reference code's bug) would give |4/3 - 5/3|.
    assert wasserstein_gap(scores, classes, "categorical").item() != pytest.approx(1 / 3)


def test_wasserstein_categorical_three_classes_and_absent_class():
    scores = torch.tensor(
        [[2.0, 9.0, 9.0, 9.0], [4.0, 9.0, 9.0, 9.0], [9.0, -1.0, 9.0, 9.0], [9.0, 9.0, 7.0, 9.0]]
    )
    classes = torch.tensor([0, 0, 1, 2])  # class 3 absent: excluded, not a mean of 0
    # pbar = (3, -1, 7) -> max - min = 8
    assert wasserstein_gap(scores, classes, "categorical").item() == pytest.approx(8.0)


def test_wasserstein_binary_one_output():
    scores = torch.tensor([1.0, 2.0, 6.0, 10.0])
    labels = torch.tensor([0, 0, 1, 1])
    assert wasserstein_gap(scores.view(-1, 1), labels, "binary").item() == pytest.approx(6.5)
    # Symmetric in the sign of the difference.
    assert wasserstein_gap(-scores, labels, "binary").item() == pytest.approx(6.5)


def test_wasserstein_binary_two_outputs_use_the_score_difference():
    scores = torch.tensor([[1.0, 0.0], [3.0, 0.0], [0.0, 5.0]])
    labels = torch.tensor([0, 0, 1])
    # f[1] - f[0] = (-1, -3, 5): |5 - (-2)| = 7, unchanged by per-column offsets.
    assert wasserstein_gap(scores, labels, "binary").item() == pytest.approx(7.0)
    shifted = scores + torch.tensor([10.0, -4.0])
    assert wasserstein_gap(shifted, labels, "binary").item() == pytest.approx(7.0)


def test_wasserstein_one_class_present_gives_zero():
    scores = torch.tensor([[1.0], [2.0]], requires_grad=True)
    gap = wasserstein_gap(scores, torch.tensor([1, 1]), "binary")
    assert gap.item() == 0.0
    gap.backward()
    assert torch.equal(scores.grad, torch.zeros(2, 1))


def test_wasserstein_multilabel_averages_label_gaps():
    scores = torch.tensor([[1.0, 0.0], [3.0, 4.0], [5.0, 8.0]])
    labels = torch.tensor([[0, 1], [1, 1], [1, 0]])
    # label 0: |mean(3,5) - 1| = 3; label 1: |mean(0,4) - 8| = 6 -> 4.5
    assert wasserstein_gap(scores, labels, "multilabel").item() == pytest.approx(4.5)


def test_wasserstein_rejects_continuous():
    with pytest.raises(ValueError, match="discrete"):
        wasserstein_gap(torch.zeros(3, 1), torch.zeros(3, 1), "continuous")


def test_wasserstein_gap_gradient_matches_hand_derivation():
    scores = torch.tensor([[1.0, 0.0], [3.0, 0.0], [0.0, 5.0]], requires_grad=True)
    wasserstein_gap(scores, torch.tensor([0, 0, 1]), "categorical").backward()
    # gap = pbar_1 - pbar_0: d/d s[2,1] = 1, d/d s[0,0] = d/d s[1,0] = -1/2.
    expected = torch.tensor([[-0.5, 0.0], [-0.5, 0.0], [0.0, 1.0]])
    torch.testing.assert_close(scores.grad, expected)


def test_tv_loss_per_kind_matches_torch():
    torch.manual_seed(0)
    logits = torch.randn(6, 1)
    labels = torch.tensor([0, 1, 1, 0, 1, 0])
    torch.testing.assert_close(
        tv_loss(logits, labels, "binary"),
        F.binary_cross_entropy_with_logits(logits.view(-1), labels.float()),
    )
    two = torch.randn(6, 2)
    torch.testing.assert_close(tv_loss(two, labels, "binary"), F.cross_entropy(two, labels))
    many = torch.randn(6, 4)
    classes = torch.tensor([0, 3, 2, 1, 1, 2])
    torch.testing.assert_close(
        tv_loss(many, classes, "categorical"), F.cross_entropy(many, classes)
    )
    sets = torch.randint(2, (6, 4)).float()
    torch.testing.assert_close(
        tv_loss(many, sets, "multilabel"), F.binary_cross_entropy_with_logits(many, sets)
    )
    values = torch.randn(6, 1)
    torch.testing.assert_close(tv_loss(logits, values, "continuous"), F.mse_loss(logits, values))


def test_adversary_loss_signs():
    scores = torch.tensor([[1.0, 0.0], [3.0, 0.0], [0.0, 5.0]])
    classes = torch.tensor([0, 0, 1])
    assert adversary_loss(scores, classes, "categorical", "wasserstein").item() == pytest.approx(-3)
    assert adversary_loss(scores, classes, "categorical", "tv").item() == pytest.approx(
        F.cross_entropy(scores, classes).item()
    )
    with pytest.raises(ValueError, match="distance"):
        adversary_loss(scores, classes, "categorical", "kl")


def test_clip_weights_bounds_every_parameter():
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    with torch.no_grad():
        for p in net.parameters():
            p.mul_(100)
    clip = torch.tensor(0.05).item()  # the float32 value the parameters can hold
    clip_weights(net, clip)
    for p in net.parameters():
        assert float(p.detach().abs().max()) <= clip
    assert any(float(p.detach().abs().max()) == clip for p in net.parameters())


def test_check_outputs_names_the_problem():
    with pytest.raises(ValueError, match="1 or 2 outputs"):
        check_outputs("gender", "binary", torch.zeros(4, 3), torch.zeros(4), 1)
    with pytest.raises(ValueError, match="7 outputs"):
        check_outputs("age", "categorical", torch.zeros(4, 3), torch.zeros(4), 7)
    with pytest.raises(ValueError, match="rows"):
        check_outputs("age", "categorical", torch.zeros(3, 7), torch.zeros(4), 7)
    check_outputs("gender", "binary", torch.zeros(4, 2), torch.zeros(4), 1)
