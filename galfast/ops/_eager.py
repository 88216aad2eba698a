"""Eager twins of galfast's custom ops.

A ``torch.library.custom_op`` with ``register_autograd`` is what torch.compile, torch.export
and opcheck need, but each eager call pays ~100 us of Python dispatch (argument schema
filling, the autograd wrapper, a redispatch), and an op whose backward calls further custom ops
pays it again there. On a GPU, where a MovieLens-size aggregation takes tens of microseconds,
that dispatch is most of a training step. So the public wrappers call a plain
``torch.autograd.Function`` built from the *same* forward implementation, setup_context and
backward when nothing is being traced, and the custom op when something is.

Even that Function's ``apply`` costs about 1 us per argument (functorch's dead-wrapper scan,
autograd's per-input bookkeeping), which on a small graph is a large part of a call: an op
whose leading inputs are graph structure that never needs a gradient passes them as one
tuple (``static``).
"""

from __future__ import annotations

from typing import Callable

import torch

__all__ = ["eager_function", "tracing"]


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
