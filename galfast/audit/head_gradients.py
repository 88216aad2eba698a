"""One training step's gradients of an attacker head, written out instead of taped.

The audit's heads are stacks of ``Linear`` layers with ``LeakyReLU`` between them, trained on
batches of 256 rows: a step is about twenty small ATen calls, and the autograd engine (graph
recording, the backward pass's scheduling, module hooks) costs more than they do. This module
runs the forward, the loss gradient and the backward through the stack under ``no_grad``, with
the ATen calls autograd's derivative formulas make, on the same operands in the same layouts,
so every gradient is bitwise what ``loss.backward()`` writes (tests/test_audit_head_gradients.py
compares them for every loss and head shape).
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from galfast.models.attacker import AttackerMLP

__all__ = ["HeadGradients"]

_MEAN = 1  # at::Reduction::Mean
_NO_IGNORE = -100  # F.cross_entropy's ignore_index
# The ATen ops F.leaky_relu and its derivative call, without the Python wrappers around them.
_leaky_relu = torch._C._nn.leaky_relu
_leaky_relu_backward = torch.ops.aten.leaky_relu_backward.default


def _layers(model: nn.Module) -> tuple[list[nn.Linear], list[float]]:
    """The head's linear layers and the LeakyReLU slopes between them."""
    modules = list(model.net) if isinstance(model, AttackerMLP) else [model]
    linears = [m for m in modules if isinstance(m, nn.Linear)]
    slopes = [m.negative_slope for m in modules if isinstance(m, nn.LeakyReLU)]
    shape_ok = len(modules) == 2 * len(linears) - 1 and len(slopes) == len(linears) - 1
    if not shape_ok or any(m.bias is None for m in linears):
        raise ValueError(
            "HeadGradients takes an nn.Linear or an AttackerMLP without dropout "
            f"(biased Linear / LeakyReLU layers only), got {model}"
        )
    return linears, slopes


class HeadGradients:
    """``head_gradients(x, y)`` sets ``p.grad`` of every parameter of ``model`` to the gradient
    of ``tv_loss(model(x), y, kind)`` (or, with ``class_weights``, of the audit's
    class-weighted loss), as ``loss.backward()`` after ``zero_grad()`` would. A gradient
    that exists already (a view of the buffer that ``flatten_parameters`` makes) is
    overwritten in place; a missing one is set to a new tensor."""

    def __init__(self, model: nn.Module, kind: str, class_weights: Optional[Tensor] = None):
        self._linears, self._slopes = _layers(model)
        # The Parameter objects, looked up once (a module attribute costs a Python call).
        self._params = [(layer.weight, layer.bias) for layer in self._linears]
        self._kind = kind
        self._weights = class_weights
        self._weights_cast: Optional[Tensor] = None

    @torch.no_grad()
    def __call__(self, x: Tensor, y: Tensor) -> None:
        inputs, pre_activations = [], []
        h = x
        for i, (weight, bias) in enumerate(self._params):
            inputs.append(h)
            h = F.linear(h, weight, bias)
            if i < len(self._slopes):
                pre_activations.append(h)
                h = _leaky_relu(h, self._slopes[i])
        grad = self._loss_gradient(h, y)
        for i in range(len(self._params) - 1, -1, -1):
            weight, bias = self._params[i]
            # linear = addmm(bias, input, weight.t()): mm_mat2_backward on the transposed
            # weight gives grad.t() @ input; the bias's gradient is sum_to's reduction.
            weight_grad, bias_grad = weight.grad, bias.grad
            if weight_grad is None or bias_grad is None:
                weight.grad = grad.t().mm(inputs[i])
                bias.grad = grad.sum([0], keepdim=True).view(bias.shape)
            else:  # the same kernels, writing into the gradients' buffers
                torch.mm(grad.t(), inputs[i], out=weight_grad)
                torch.sum(grad, [0], keepdim=True, out=bias_grad.view(1, -1))
            if i > 0:
                grad = _leaky_relu_backward(
                    grad.mm(weight), pre_activations[i - 1], self._slopes[i - 1], False
                )

    def _class_weights(self, dtype: torch.dtype) -> Optional[Tensor]:
        """The class weights in ``dtype``, converted once, not at every step (always from
        the given ones: a round trip through a narrower dtype would round them)."""
        if self._weights is None:
            return None
        if self._weights_cast is None or self._weights_cast.dtype != dtype:
            self._weights_cast = self._weights.to(dtype)
        return self._weights_cast

    def _loss_gradient(self, out: Tensor, y: Tensor) -> Tensor:
        """d loss / d out as autograd's formulas compute it from the seed gradient 1."""
        kind, weights = self._kind, self._class_weights(out.dtype)
        one = torch.ones((), dtype=out.dtype, device=out.device)  # backward()'s seed
        one_logit = out.dim() == 1 or out.size(-1) == 1
        if kind == "binary" and weights is None and one_logit:
            # binary_cross_entropy_with_logits_backward, mean reduction.
            logits = out.view(-1)
            grad = torch.sigmoid(logits).sub_(y.to(out.dtype)).div_(logits.numel())
            return grad.view(out.shape)
        if kind == "binary" and weights is not None:
            # (bce(l, y, "none") * w[y]).sum() / w[y].sum(): div, sum and mul backwards, then
            # the unreduced BCE's.
            wy = weights.index_select(0, y.view(-1))  # w[y]'s values, without indexing's setup
            upstream = (one / wy.sum()).expand(wy.shape) * wy
            grad = torch.sigmoid(out.view(-1)).sub_(y.to(out.dtype)).mul_(upstream)
            return grad.view(out.shape)
        if kind in ("binary", "categorical"):
            # cross_entropy = nll_loss(log_softmax(out, 1)): their two backwards.
            log_p = torch.log_softmax(out, 1)
            _, total_weight = torch.ops.aten.nll_loss_forward(log_p, y, weights, _MEAN, _NO_IGNORE)
            grad = torch.ops.aten.nll_loss_backward(
                one, log_p, y, weights, _MEAN, _NO_IGNORE, total_weight
            )
            return torch.ops.aten._log_softmax_backward_data(grad, log_p, 1, out.dtype)
        if kind == "multilabel":
            return torch.sigmoid(out).sub_(y.to(out.dtype)).div_(out.numel())
        target = y.to(out.dtype)
        grad = torch.ops.aten.mse_loss_backward(one, out.view_as(target), target, _MEAN)
        return grad.view(out.shape)
