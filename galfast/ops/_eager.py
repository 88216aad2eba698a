"""Eager twins of galfast's custom ops.

A ``torch.library.custom_op`` with ``register_autograd`` is what torch.compile, torch.export
and opcheck need, but each eager call pays ~100 us of Python dispatch (argument schema
filling, the autograd wrapper, a redispatch), and an op whose backward calls further custom ops
pays it again there. On a GPU, where a MovieLens-size aggregation takes tens of microseconds,
that dispatch is most of a training step. So the public wrappers call a plain
``torch.autograd.Function`` built from the *same* forward implementation, setup_context and
backward when nothing is being traced, and the custom op when something is. functorch runs
neither (both set up their context inside ``forward``): under torch.func transforms the
wrappers call a third form, ``_functorch.functorch_function``.

Even that Function's ``apply`` costs about 1 us per argument (functorch's dead-wrapper scan,
autograd's per-input bookkeeping), which on a small graph is a large part of a call: an op
whose leading inputs are graph structure that never needs a gradient passes them as one
tuple (``static``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Callable, Optional

import torch
from torch import Tensor

__all__ = ["composition_grads", "eager_function", "refuse_second_derivative", "tracing"]


def tracing() -> bool:
    """True under torch.compile / torch.export tracing, where only the custom op will do."""
    return torch.compiler.is_compiling()


def eager_function(
    forward: Callable,
    setup_context: Callable,
    backward: Callable,
    static: int = 0,
    backward_only_outputs: bool = False,
) -> type[torch.autograd.Function]:
    """An autograd.Function running ``forward(*inputs)`` (the custom op's undecorated body)
    with the op's ``setup_context`` and ``backward``. It sets ``ctx.eager = True`` so that the
    backward can call the plain kernels instead of the traced ops.

    With ``static = n`` it is applied as ``apply(inputs[:n], *inputs[n:])``: the first n
    inputs, which must never need a gradient, travel as one tuple. ``setup_context`` and
    ``backward`` still see the op's own argument list (``ctx.needs_input_grad`` included).

    With ``backward_only_outputs``, the Function returns only the first of the op's outputs:
    the others (aggregate's max arg) are saved for the backward and never read by the caller,
    and each output autograd wraps costs about 1 us more."""

    class EagerOp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            if static:
                inputs = (*inputs[0], *inputs[1:])
                ctx.needs_input_grad = (False,) * static + ctx.needs_input_grad[1:]
            output = forward(*inputs)
            ctx.eager = True
            setup_context(ctx, inputs, output)
            if backward_only_outputs:
                ctx.num_outputs = len(output)
                return output[0]
            return output

        @staticmethod
        def backward(ctx, *grads):
            if backward_only_outputs:
                grads = grads + (None,) * (ctx.num_outputs - 1)
            grads = backward(ctx, *grads)
            return (None, *grads[static:]) if static else grads

    EagerOp.__name__ = EagerOp.__qualname__ = f"Eager_{forward.__name__.lstrip('_')}"
    return EagerOp


class _DifferentiableOnce(torch.autograd.Function):
    """Passes gradients through; differentiating them raises (see refuse_second_derivative)."""

    @staticmethod
    def forward(ctx, op: str, *grads):
        ctx.op = op
        return grads

    @staticmethod
    def backward(ctx, *_):
        raise RuntimeError(
            f"{ctx.op} is differentiable once: its backward runs kernels that record no "
            "autograd graph, so a second derivative through it (create_graph=True, e.g. a "
            "gradient penalty or a Hessian) is not available"
        )


def refuse_second_derivative(op: str, grads: tuple) -> tuple:
    """``grads`` (a backward's results, None for inputs without one), each made to require a
    gradient whose computation raises a RuntimeError naming ``op``. A backward under
    ``create_graph=True`` returns these: plain kernel results would read as constants, and a
    second derivative would silently leave out every term through the op."""
    present = [g.detach().requires_grad_() for g in grads if g is not None]
    with torch.enable_grad():
        marked = iter(_DifferentiableOnce.apply(op, *present))
    return tuple(None if g is None else next(marked) for g in grads)


def composition_grads(
    compose: Callable, inputs: Sequence[Optional[Tensor]], wanted: Sequence[bool], grad: Tensor
) -> tuple[Optional[Tensor], ...]:
    """The gradients of ``compose(*inputs)`` (an op's forward in differentiable torch ops) for
    the ``wanted`` inputs, with a graph of their own: what a backward under
    ``create_graph=True`` returns, where the kernels' gradients would record none. They are
    partial derivatives: an input computed from another (GATConv's logits from its features)
    gets its own only, as the outer backward follows the path from one to the other itself.
    Zeros for a wanted input that no output reads.

    torch.func.vjp takes them, not autograd.grad: it differentiates with respect to its own
    wrappers of the inputs (so, partially), also inside torch.func transforms (jacrev's vmap of
    a vjp, where requires_grad_ is refused) and for the saved inputs of a torch.func.vjp that
    has returned (dead wrappers, read here by value), and its results stay differentiable by
    every enclosing transform and by autograd."""
    inputs = [None if t is None else torch._C._functorch.unwrap_if_dead(t) for t in inputs]
    picked = [t for t, want in zip(inputs, wanted) if want]
    if not picked:
        return (None,) * len(inputs)

    def of_picked(*values: Tensor) -> Tensor:
        values = iter(values)
        return compose(*(next(values) if want else t for t, want in zip(inputs, wanted)))

    with torch.enable_grad():
        _, vjp_fn = torch.func.vjp(of_picked, *picked)
        grads = iter(vjp_fn(grad))
    return tuple(next(grads) if want else None for want in wanted)
