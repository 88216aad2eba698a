"""The class cross-entropy of the task losses (issue 19, a whole MovieLens run): few classes
take ATen's vectorised softmax across rows; value and gradient are F.cross_entropy's."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from galfast.train import classification_loss, rating_cross_entropy, tasks
from galfast.train.batches import NodeBatch, RatingBatch


@pytest.mark.parametrize("classes", [2, 5, 7, 8, 15, 16, 40])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_losses_equal_cross_entropy_value_and_gradient(classes, dtype):
    gen = torch.Generator().manual_seed(classes)
    scores = torch.randn(300, classes, generator=gen, dtype=dtype, requires_grad=True)
    target = torch.randint(0, classes, (300,), generator=gen)
    reference = scores.detach().clone().requires_grad_()
    expected = F.cross_entropy(reference, target)
    expected.backward()
    batch = RatingBatch(target, target, target, target.to(dtype))
    for loss in (
        rating_cross_entropy(scores, batch),
        classification_loss(scores, NodeBatch(target, target)),
    ):
        (grad,) = torch.autograd.grad(loss, scores)
        tol = 1e-6 if dtype == torch.float32 else 1e-13
        torch.testing.assert_close(loss, expected, rtol=tol, atol=tol)
        torch.testing.assert_close(grad, reference.grad, rtol=tol, atol=tol)


def test_gradcheck_float64():
    gen = torch.Generator().manual_seed(0)
    scores = torch.randn(20, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    target = torch.randint(0, 5, (20,), generator=gen)
    batch = RatingBatch(target, target, target, target.double())
    assert torch.autograd.gradcheck(lambda s: rating_cross_entropy(s, batch), (scores,))
    assert torch.autograd.gradgradcheck(lambda s: rating_cross_entropy(s, batch), (scores,))


def test_few_classes_take_the_transposed_softmax(monkeypatch):
    shapes = []
    real = F.cross_entropy
    monkeypatch.setattr(tasks.F, "cross_entropy", lambda s, t: shapes.append(s.shape) or real(s, t))
    target = torch.zeros(64, dtype=torch.long)
    rating_cross_entropy(torch.randn(64, 5), RatingBatch(target, target, target, target.float()))
    classification_loss(torch.randn(64, 40), NodeBatch(target, target))
    assert shapes == [(1, 5, 64), (64, 40)]


@pytest.mark.parametrize("classes", [5, 40])  # the transposed softmax and the plain one
@pytest.mark.parametrize("bad", [-1, 40])
def test_a_class_id_out_of_range_is_a_value_error_naming_it(classes, bad):
    # Was ATen's raw IndexError ("Target 5 is out of bounds.") from deep inside the loss.
    target = torch.tensor([0, bad])
    with pytest.raises(ValueError, match=rf"batch.level must hold class ids in \[0, {classes}\)"):
        rating_cross_entropy(
            torch.randn(2, classes), RatingBatch(target, target, target, target.float())
        )
    with pytest.raises(ValueError, match=f"batch.y must hold .*Target {bad} is out of bounds"):
        classification_loss(torch.randn(2, classes), NodeBatch(target, target))
