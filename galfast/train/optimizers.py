"""Building the trainer's optimizers from a name or a factory."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Callable, Union

import torch
from torch import Tensor, nn

from galfast.train.lean_adam import LEAN_DEVICES, LeanAdam, LeanAdamW

__all__ = ["OPTIMIZERS", "make_capturable", "make_optimizer", "unique_parameters"]

OPTIMIZERS = {
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "sgd": torch.optim.SGD,
    "rmsprop": torch.optim.RMSprop,
}

OptimizerSpec = Union[str, Callable[..., torch.optim.Optimizer]]

# Named optimizers that take torch's fused kernel: one pass over each parameter per step
# instead of about ten elementwise ops (Adam's step was ~17% of a knowledge-graph GAL batch on
# the CPU, whose ConvE decoder has 7.8M weights; fused: 4.5x faster, equal to float rounding),
# through the lean subclasses of galfast.train.lean_adam (no torch._dynamo import: 1.2-1.6 s
# of a GPU run's start-up, and less Python a step).
_FUSED = {"adam": LeanAdam, "adamw": LeanAdamW}


def check_optimizer(spec: OptimizerSpec) -> None:
    if isinstance(spec, str) and spec not in OPTIMIZERS:
        raise ValueError(
            f"optimizer must be one of {sorted(OPTIMIZERS)} or a callable "
            f"(params, lr) -> Optimizer, got {spec!r}"
        )
    if not isinstance(spec, str) and not callable(spec):
        raise ValueError(f"optimizer must be a name or a callable, got {type(spec).__name__}")


def unique_parameters(*modules: object) -> list[nn.Parameter]:
    """The trainable parameters of ``modules`` (non-modules contribute none), each once, in
    order (a head may share weights with the encoder)."""
    seen, params = set(), []
    for module in modules:
        if not isinstance(module, nn.Module):
            continue
        for p in module.parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                params.append(p)
    return params


def make_optimizer(
    spec: OptimizerSpec, params: Iterable[nn.Parameter], lr: float
) -> torch.optim.Optimizer:
    """``OPTIMIZERS[spec](params, lr=lr)`` for a name, else ``spec(params, lr=lr)``. Adam and
    AdamW over floating parameters on the CPU or one GPU use torch's fused step
    (``fused=True``), as the lean subclasses :class:`~galfast.train.lean_adam.LeanAdam` and
    ``LeanAdamW``."""
    params = list(params)
    if not isinstance(spec, str):
        return _checked_factory_result(spec(params, lr=lr), params)
    fused = (
        spec in _FUSED
        and bool(params)
        and len({p.device for p in params}) == 1
        and all(p.device.type in LEAN_DEVICES and p.is_floating_point() for p in params)
    )
    if fused:
        return _FUSED[spec](params, lr=lr, fused=True)
    return OPTIMIZERS[spec](params, lr=lr)


def _checked_factory_result(optimizer: object, params: list[nn.Parameter]) -> torch.optim.Optimizer:
    """What an optimizer factory built, refused unless it is an optimizer over ``params``: all
    that require gradients (frozen ones it may leave out) and no others. One over other
    parameters would train nothing the trainer uses, silently."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(
            f"optimizer factory must return a torch.optim.Optimizer, got {type(optimizer).__name__}"
        )
    if _needs_closure(optimizer):
        raise ValueError(
            f"optimizer factory built {type(optimizer).__name__}, whose step needs a closure "
            "that re-evaluates the loss; the trainer steps once per batch without one: use an "
            "optimizer whose step() takes no arguments (Adam, SGD, ...)"
        )
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    given = {id(p) for p in params}
    trainable = {id(p) for p in params if p.requires_grad}
    if not trainable <= held <= given:
        raise ValueError(
            f"optimizer factory must build the optimizer over the {len(trainable)} trainable "
            f"parameters it is given; it holds {len(held & trainable)} of them and "
            f"{len(held - given)} others"
        )
    return optimizer


def _needs_closure(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``optimizer.step`` has a required argument (LBFGS's closure)."""
    try:
        parameters = inspect.signature(optimizer.step).parameters.values()
    except (TypeError, ValueError):  # a step without a signature: assume the usual one
        return False
    return any(
        p.default is inspect.Parameter.empty
        and p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for p in parameters
    )


def make_capturable(optimizer: torch.optim.Optimizer) -> None:
    """Lets ``optimizer.step()`` be recorded in a CUDA graph: turns on ``capturable`` in every
    parameter group that has the option (Adam, AdamW, RMSprop, ...: the step counter then lives
    on the parameter's device and no step reads it on the host) and moves step counters that
    an earlier run or a checkpoint left on the CPU. Optimizers without the option (SGD) keep
    no host-side state and need nothing."""
    for group in optimizer.param_groups:
        if "capturable" in group:
            group["capturable"] = True
    for param, state in optimizer.state.items():
        step = state.get("step")
        if isinstance(step, Tensor) and step.device != param.device:
            state["step"] = step.to(param.device)
