"""GradReverse: identity forward, gradient multiplied by -scale backward."""

import pytest
import torch

from galfast.train import GradReverse, grad_reverse


@pytest.mark.parametrize("scale", [1.0, 0.25, 3.0])
def test_forward_is_identity_and_backward_flips(scale):
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    upstream = torch.randn(5, 3, dtype=torch.float64)
    y = GradReverse(scale)(x)
    assert torch.equal(y, x)
    y.backward(upstream)
    torch.testing.assert_close(x.grad, -scale * upstream)


def test_reversal_composes_with_the_rest_of_the_graph():
    # d/dw of f(GRL(w * x)) = -x * f'(.): the adversary side sees the true gradient, the
    # encoder side the negated one.
    w = torch.tensor(2.0, requires_grad=True)
    f = torch.tensor(3.0, requires_grad=True)
    x = torch.tensor(5.0)
    loss = f * grad_reverse(w * x)
    loss.backward()
    assert f.grad.item() == pytest.approx(10.0)
    assert w.grad.item() == pytest.approx(-15.0)


def test_scale_zero_blocks_the_gradient():
    x = torch.ones(3, requires_grad=True)
    grad_reverse(x, 0.0).sum().backward()
    assert torch.equal(x.grad, torch.zeros(3))


def test_negative_scale_is_rejected():
    with pytest.raises(ValueError, match="scale"):
        GradReverse(-1.0)
    with pytest.raises(ValueError, match="scale"):
        grad_reverse(torch.ones(1), -0.5)


def test_torch_func_transforms_run_through_the_reversal():
    # per-sample gradients of an adversary's loss: vmap of grad, as torch.func users write it
    def loss(x):
        return (grad_reverse(x, 2.0) ** 2).sum()

    x = torch.tensor([[1.0, -3.0], [0.5, 2.0]])
    assert torch.equal(torch.func.vmap(torch.func.grad(loss))(x), -2.0 * 2 * x)
