"""galfast's ops under torch.func transforms (grad, vjp, jacrev, vmap).

The eager twins (``_eager.eager_function``) set up their context inside ``forward``, which
functorch refuses, and so does the ``autograd.Function`` that ``torch.library`` generates for a
custom op's ``register_autograd``. While a transform is active the public wrappers call a third
form instead, :func:`functorch_function`: the same forward, setup_context and backward as an
``autograd.Function`` with a separate ``setup_context`` (what functorch needs), a ``vmap`` rule
and a ``jvp`` that names the op. It is not the eager path because its ``apply`` binds its
arguments by signature, some microseconds a call (see ``bench/call_overhead.py``).

Every transform reaches a backward with grad mode on (torch.func differentiates with
``create_graph=True``), so the backwards differentiate their torch compositions there
(``_eager.composition_grads``): torch ops, which every transform, vmap and forward mode
included, runs through. The kernels' own backward (grad mode off) runs the kernel ops; their
vmap rule is :func:`register_loop_vmap`.
"""

from __future__ import annotations

from typing import Callable, Optional

import torch
from torch import Tensor

from galfast.ops._eager import tracing

__all__ = [
    "fold_features",
    "functorch_function",
    "plain_value",
    "register_loop_vmap",
    "route",
    "transforms_active",
]

# One C call, about 40 ns: the public wrappers ask it on every eager call.
transforms_active: Callable[[], bool] = torch._C._are_functorch_transforms_active


def _sample(args: tuple, in_dims: tuple, index: int) -> list:
    """Sample ``index`` of vmapped arguments, contiguous (the kernels read raw memory)."""
    return [
        arg if dim is None else arg.select(dim, index).contiguous()
        for arg, dim in zip(args, in_dims)
    ]


def _stacked(results: list):
    """Per-sample results (a tensor or a tuple of them each) stacked along a new dim 0."""
    if isinstance(results[0], Tensor):
        return torch.stack(results), 0
    outputs = tuple(torch.stack(parts) for parts in zip(*results))
    return outputs, (0,) * len(outputs)


def _loop(fn: Callable, info, in_dims: tuple, args: tuple):
    """``fn`` once per sample of the batch: what a vmap of an op with no batched form is."""
    return _stacked([fn(*_sample(args, in_dims, i)) for i in range(info.batch_size)])


def register_loop_vmap(op: torch.library.CustomOpDef) -> None:
    """Gives a kernel custom op a vmap rule that calls it once per sample. torch's fallback
    does the same but hands the kernels strided slices (of a batch dimension other than 0),
    whose memory they would misread."""

    def rule(info, in_dims, *args):
        return _loop(op, info, in_dims, args)

    torch.library.register_vmap(op, rule)


def fold_features(position: int) -> Callable:
    """A vmap rule for an op whose output rows are column-wise functions of the ``[N, F]``
    features at input ``position`` (aggregate: every reduction and scaling acts per column).
    When only those features are batched, the batch folds into the columns: one call on
    ``[N, B * F]`` instead of B calls. Every output is ``[rows, B * F]`` or empty. Returns None
    (so the caller loops) when another input is batched too."""

    def rule(function, info, in_dims, args):
        if any(dim is not None for i, dim in enumerate(in_dims) if i != position):
            return None
        features = args[position].movedim(in_dims[position], 1)
        rows, batch, width = features.shape
        folded = list(args)
        folded[position] = features.reshape(rows, batch * width)
        outputs = function.apply(*folded)
        single = isinstance(outputs, Tensor)
        unfolded = [
            (out.view(out.size(0), batch, width), 1) if out.dim() == 2 else (out, None)
            for out in ((outputs,) if single else outputs)
        ]
        results, dims = zip(*unfolded)
        return (results[0], dims[0]) if single else (results, dims)

    return rule


def functorch_function(
    name: str,
    forward: Callable,
    setup_context: Callable,
    backward: Callable,
    batched_rule: Optional[Callable] = None,
) -> type[torch.autograd.Function]:
    """The op ``name`` as an autograd.Function functorch transforms run: ``forward(*inputs)``
    (the custom op's body; functorch calls it on plain tensors only), the op's
    ``setup_context`` and ``backward`` (``ctx.eager`` unset: without grad mode the backward
    runs the kernel ops, which vmap), a vmap rule (``batched_rule(function, info, in_dims,
    args)``, see :func:`fold_features`, else one call per sample) and a ``jvp`` that raises a
    NotImplementedError naming the op and what to use instead."""

    class FunctorchOp(torch.autograd.Function):
        @staticmethod
        def forward(*inputs):
            return forward(*inputs)

        @staticmethod
        def setup_context(ctx, inputs, output):
            setup_context(ctx, inputs, output)

        @staticmethod
        def backward(ctx, *grads):
            return backward(ctx, *grads)

        @staticmethod
        def jvp(ctx, *tangents):
            raise NotImplementedError(
                f"galfast.ops.{name} has no forward-mode derivative, so torch.func.jvp, "
                "jacfwd and hessian (jacfwd of jacrev) cannot run through it: use reverse "
                "mode, torch.func.vjp or jacrev (a Hessian as jacrev(jacrev(f)), a "
                "Hessian-vector product as a vjp of a vjp)"
            )

        @staticmethod
        def vmap(info, in_dims, *args):
            result = (
                None if batched_rule is None else batched_rule(FunctorchOp, info, in_dims, args)
            )
            return _loop(FunctorchOp.apply, info, in_dims, args) if result is None else result

    FunctorchOp.__name__ = FunctorchOp.__qualname__ = f"Functorch_{name}"
    return FunctorchOp


def route(custom_op: Callable, functorch: type, eager: type) -> Callable:
    """What a public wrapper calls: the custom op while tracing, the functorch Function under
    torch.func transforms, else the eager twin."""
    if tracing():
        return custom_op
    return functorch.apply if transforms_active() else eager.apply


def plain_value(t: Tensor) -> Tensor:
    """The plain tensor under ``t``'s torch.func wrappers (under vmap, every sample's values):
    what a check that reads values on the host scans, as vmap refuses ``.item()``."""
    while torch._C._functorch.is_functorch_wrapped_tensor(t):
        t = torch._C._functorch.get_unwrapped(t)
    return t
