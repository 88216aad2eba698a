"""Eager twins of galfast's custom ops.

A ``torch.library.custom_op`` with ``register_autograd`` is what torch.compile, torch.export
and opcheck need, but each eager call pays ~100 us of Python dispatch (argument schema
filling, the autograd wrapper, a redispatch), and an op whose backward calls further custom ops
pays it again there. On a GPU, where a MovieLens-size aggregation takes tens of microseconds,
that dispatch is most of a training step. So the public wrappers call a plain
``torch.autograd.Function`` built from the *same* forward implementation, setup_context and
backward when nothing is being traced, and the custom op when something is.
"""

from __future__ import annotations

from typing import Callable

import torch

__all__ = ["eager_function", "tracing"]


def tracing() -> bool:
    """True under torch.compile / torch.export tracing, where only the custom op will do."""
    return torch.compiler.is_compiling()


def eager_function(
    forward: Callable, setup_context: Callable, backward: Callable
) -> type[torch.autograd.Function]:
    """An autograd.Function running ``forward(*inputs)`` (the custom op's undecorated body)
    with the op's ``setup_context`` and ``backward``. It sets ``ctx.eager = True`` so that the
    backward can call the plain kernels instead of the traced ops."""

    class EagerOp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            output = forward(*inputs)
            ctx.eager = True
            setup_context(ctx, inputs, output)
            return output

        @staticmethod
        def backward(ctx, *grads):
            return backward(ctx, *grads)

    EagerOp.__name__ = EagerOp.__qualname__ = f"Eager_{forward.__name__.lstrip('_')}"
    return EagerOp
