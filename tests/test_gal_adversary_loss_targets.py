"""The adversary losses called directly, with targets that do not fit the attribute: each is
refused by name (it was torch's low-level error, or a loss computed from garbage)."""

import pytest
import torch

from galfast.gal import adversary_loss, tv_loss

SCORES = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
LOGITS = torch.randn(4, 1, generator=torch.Generator().manual_seed(1))

BAD = [
    # (outputs, targets, kind, message)
    (SCORES, torch.tensor([0, 1, 2, 3]), "categorical", r"class ids in \[0, 3\).*got 3"),
    (SCORES, torch.tensor([0, -1, 2, 0]), "categorical", r"class ids in \[0, 3\).*got -1"),
    (SCORES, torch.tensor([0.0, 1.0, 2.0, 0.0]), "categorical", "1-D integer tensor"),
    (SCORES, torch.tensor([[0], [1], [2], [0]]), "categorical", "1-D integer tensor"),
    (SCORES, torch.tensor([0, 1, 2]), "categorical", "same number of rows"),
    (torch.randn(4), torch.tensor([0, 1, 2, 0]), "categorical", r"\[rows, classes\] outputs"),
    (LOGITS, torch.tensor([0, 1, 2, 0]), "binary", "must be 0 or 1, got 2"),
    (LOGITS, torch.tensor([0.0, 1.0, 1.0, float("nan")]), "binary", "1-D integer tensor"),
    (LOGITS, torch.tensor([True, False, True, True]), "binary", "1-D integer tensor"),
    (SCORES, torch.tensor([0, 1, 1, 0]), "binary", "1 or 2 outputs"),
    (SCORES, torch.tensor([[0, 1, 1]] * 3 + [[2, 0, 0]]), "multilabel", "0 or 1, got 2"),
    (SCORES, torch.tensor([[0.0, 1, 1]] * 3 + [[float("nan"), 0, 0]]), "multilabel", "got nan"),
    (SCORES, torch.tensor([[0, 1]] * 4), "multilabel", r"outputs' shape \[4, 3\]"),
    (torch.tensor([[0, 1]] * 4), torch.tensor([0, 1, 1, 0]), "binary", "float tensor"),
    (SCORES[:0], torch.tensor([], dtype=torch.long), "categorical", "at least one"),
    (SCORES, [0, 1, 2, 0], "categorical", "targets must be a torch.Tensor"),
]


@pytest.mark.parametrize(("outputs", "targets", "kind", "match"), BAD)
@pytest.mark.parametrize("distance", ["tv", "wasserstein"])
def test_targets_that_do_not_fit_are_refused_by_name(outputs, targets, kind, match, distance):
    with pytest.raises(ValueError, match=match):
        adversary_loss(outputs, targets, kind, distance)


@pytest.mark.parametrize(
    ("targets", "match"),
    [
        (torch.tensor([[1.0], [float("nan")], [0.5], [2.0]]), "finite, got nan"),
        (torch.tensor([[1.0], [2.0]]), "same number of rows"),
        (torch.tensor([[1.0, 2.0]] * 4), "one value per output"),
        (torch.tensor([1.0, 2.0, 3.0, 4.0]) * 1j, "must be real"),
    ],
)
def test_continuous_targets_that_do_not_fit_are_refused(targets, match):
    with pytest.raises(ValueError, match=match):
        tv_loss(LOGITS, targets, "continuous")


def test_the_trainer_skips_only_the_check_of_values():
    # check_targets=False: the trainer's targets were checked when its attribute was built,
    # so their values are not looked at (no device wait); the free checks still run.
    two = torch.tensor([0, 1, 2, 0])
    with pytest.raises(ValueError, match="0 or 1"):
        tv_loss(LOGITS, two, "binary")
    assert tv_loss(LOGITS, two, "binary", check_targets=False).dim() == 0
    with pytest.raises(ValueError, match="1-D integer tensor"):
        tv_loss(LOGITS, two.float(), "binary", check_targets=False)


def test_targets_that_fit_give_the_same_loss_checked_or_not():
    targets = torch.tensor([0, 2, 1, 2])
    for distance in ("tv", "wasserstein"):
        checked = adversary_loss(SCORES, targets, "categorical", distance)
        unchecked = adversary_loss(SCORES, targets, "categorical", distance, check_targets=False)
        assert torch.equal(checked, unchecked)
