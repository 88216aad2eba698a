"""Gradient reversal (Ganin & Lempitsky, 2015): identity forward, negated gradient backward."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from galfast._args import check_real

__all__ = ["GradReverse", "grad_reverse"]


class _GradReverseFn(torch.autograd.Function):
    # A separate setup_context and a vmap rule: what torch.func transforms (grad, vmap of
    # grad for per-sample gradients) need of a Function. No jvp: torch.compile cannot trace a
    # Function that defines one (forward mode through the reversal is not needed by GAL).
    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor, scale: float) -> Tensor:
        return x.view_as(x)

    @staticmethod
    def setup_context(ctx, inputs: tuple, output: Tensor) -> None:
        ctx.scale = inputs[1]

    @staticmethod
    def backward(ctx, grad_out: Tensor) -> tuple[Tensor, None]:
        return -ctx.scale * grad_out, None


def _checked_scale(scale: float) -> float:
    """``scale`` as a float; NaN, a string or None would only fail (or poison the gradient) in
    the backward."""
    scale = check_real("scale", scale)
    if scale < 0:
        raise ValueError(f"scale must be >= 0 (the sign is already reversed), got {scale}")
    return scale


def grad_reverse(x: Tensor, scale: float = 1.0) -> Tensor:
    r"""Returns ``x`` unchanged; in backward, multiplies the incoming gradient by ``-scale``.

    .. math::
        \mathrm{forward}(x) = x, \qquad
        \frac{\partial L}{\partial x} = -\mathrm{scale} \cdot \frac{\partial L}{\partial y}

    Placed between the encoder and the adversary, one backward pass trains the adversary to
    *minimise* its loss while pushing the encoder to *maximise* it.

    Example:
        >>> x = torch.ones(2, requires_grad=True)
        >>> grad_reverse(x, 0.5).sum().backward()
        >>> x.grad
        tensor([-0.5000, -0.5000])
    """
    return _GradReverseFn.apply(x, _checked_scale(scale))


class GradReverse(nn.Module):
    """Module form of :func:`grad_reverse` with a fixed ``scale`` (default 1)."""

    def __init__(self, scale: float = 1.0) -> None:
        super().__init__()
        self.scale = _checked_scale(scale)

    def forward(self, x: Tensor) -> Tensor:
        return grad_reverse(x, self.scale)

    def extra_repr(self) -> str:
        return f"scale={self.scale}"
