"""torch's fused Adam and AdamW with a lean step (the trainer's named "adam" / "adamw"), on
the CPU or one GPU.

Why: every method of ``torch.optim.Optimizer`` that the trainer calls (``add_param_group`` in
the constructor, ``zero_grad``, Adam's ``step``) imports ``torch._dynamo`` on its first call,
about 1.1-1.5 s of CPU time in a process that never compiles anything (a tenth of a MovieLens
run's start-up). And Adam's step rebuilds its lists of states and regroups them by device and
dtype on every call, Python work that costs about as much as the fused update of MovieLens'
200k weights. These subclasses call the same undecorated methods and, for the configuration
the trainer builds (fused, one device and dtype, no amsgrad / maximize), the same
``torch._foreach_add_`` and ``torch._fused_adam(w)_`` with the same arguments, so the updates
are bitwise those of ``torch.optim.Adam(fused=True)``; any other configuration, set at
construction or edited into ``param_groups`` later, takes torch's own step. ``capturable``
changes nothing in a fused step (its step counters live on the parameters' device anyway), so
a step replayed from a CUDA graph is lean too. They remain ``torch.optim.Adam`` / ``AdamW``
instances (same ``state_dict``, schedulers, hooks).

``zero_grad`` and the hook wrapper around ``step`` open a ``record_function`` range (a
dispatched op, about a tenth of a small graph's whole Adam step) only while the autograd
profiler records, so a profile still shows ``Optimizer.step#LeanAdam.step``.
"""

from __future__ import annotations

import contextlib
import functools
from itertools import chain
from typing import Any, Callable, Optional

import torch
from torch import Tensor
from torch.optim.optimizer import _global_optimizer_post_hooks, _global_optimizer_pre_hooks

__all__ = ["LEAN_DEVICES", "LeanAdam", "LeanAdamW"]

# Where torch has the fused kernel the lean step calls.
LEAN_DEVICES = ("cpu", "cuda")


def _undecorated(method: Callable) -> Callable:
    """``method`` without torch's ``_disable_dynamo`` wrapper (which only matters under
    ``torch.compile`` and imports ``torch._dynamo`` when first called); the wrapped method
    itself if a torch version stops exposing it through ``functools.wraps``."""
    return getattr(method, "__wrapped__", method)


_add_param_group = _undecorated(torch.optim.Optimizer.add_param_group)
_zero_grad = _undecorated(torch.optim.Optimizer.zero_grad)


class _LeanStep:
    """The lean step of LeanAdam and LeanAdamW (torch's AdamW is its Adam with decoupled weight
    decay, which picks the fused kernel per group)."""

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        _add_param_group(self, param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        if not set_to_none or torch.autograd._profiler_enabled():
            _zero_grad(self, set_to_none)
            return
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None

    @staticmethod
    def profile_hook_step(func: Callable) -> Callable:
        """torch's wrapper of ``step`` (the constructor puts it on the class): the pre-hooks,
        the step, ``_optimizer_step_code``, the post-hooks, with the profiler range only while
        the profiler records."""

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            # As torch's: ``args`` holds the optimizer first, in what the hooks see and return.
            self = args[0]
            recording = torch.autograd._profiler_enabled()
            name = f"Optimizer.step#{type(self).__name__}.step"
            with torch.autograd.profiler.record_function(name) if recording else _NO_RANGE:
                for pre_hook in chain(
                    _global_optimizer_pre_hooks.values(), self._optimizer_step_pre_hooks.values()
                ):
                    result = pre_hook(self, args, kwargs)
                    if result is not None:
                        if not (isinstance(result, tuple) and len(result) == 2):
                            raise RuntimeError(
                                f"{func} must return None or a tuple of (new_args, new_kwargs), "
                                f"but got {result}."
                            )
                        args, kwargs = result
                out = func(*args, **kwargs)
                self._optimizer_step_code()
                for post_hook in chain(
                    self._optimizer_step_post_hooks.values(), _global_optimizer_post_hooks.values()
                ):
                    post_hook(self, args, kwargs)
                return out

        return wrapper

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        stepped = [
            [p for p in group["params"] if p.grad is not None] for group in self.param_groups
        ]
        if not all(map(_is_lean_group, self.param_groups)) or not all(map(_one_kind, stepped)):
            return _unhooked(super().step)(closure)
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        with torch.no_grad():
            for group, params in zip(self.param_groups, stepped):
                if params:
                    self._step_group(group, params)
        return loss

    def _step_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        if any(p.grad.is_sparse for p in params):
            raise RuntimeError(
                "Adam does not support sparse gradients, please consider SparseAdam instead"
            )
        states = [self._state(p) for p in params]
        steps = [s["step"] for s in states]
        torch._foreach_add_(steps, 1)
        beta1, beta2 = group["betas"]
        update = torch._fused_adamw_ if group.get("decoupled_weight_decay") else torch._fused_adam_
        update(
            params,
            [p.grad for p in params],
            [s["exp_avg"] for s in states],
            [s["exp_avg_sq"] for s in states],
            [],
            steps,
            amsgrad=False,
            lr=group["lr"],
            beta1=float(beta1),
            beta2=float(beta2),
            weight_decay=group["weight_decay"],
            eps=group["eps"],
            maximize=False,
            grad_scale=None,
            found_inf=None,
        )

    def _state(self, p: Tensor) -> dict[str, Tensor]:
        """``p``'s Adam state, created as torch's fused Adam creates it on the first step."""
        state = self.state[p]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return state


_NO_RANGE = contextlib.nullcontext()


def _unhooked(step: Callable) -> Callable:
    """torch's step without the profiling-and-hooks wrapper the Optimizer constructor puts on a
    class's ``step`` (this class's own wrapper has already run the hooks)."""
    if getattr(step, "hooked", False):
        return step.__wrapped__.__get__(step.__self__)
    return step


def _one_kind(params: list[Tensor]) -> bool:
    """Tensors on one CPU or GPU, of one dtype (torch's fused step groups the others by device
    and dtype)."""
    return len({(p.device, p.dtype) for p in params}) <= 1 and all(
        p.device.type in LEAN_DEVICES for p in params
    )


def _is_lean_group(group: dict[str, Any]) -> bool:
    """The configuration the lean step reproduces; anything else goes to torch's step."""
    return (
        group.get("fused") is True
        and not group.get("amsgrad")
        and not group.get("maximize")
        and not group.get("differentiable")
        and not isinstance(group.get("lr"), Tensor)
        and not any(isinstance(b, Tensor) for b in group.get("betas", ()))
    )


class LeanAdam(_LeanStep, torch.optim.Adam):
    """``torch.optim.Adam(params, lr=lr, fused=True, ...)`` with the lean step."""


class LeanAdamW(_LeanStep, torch.optim.AdamW):
    """``torch.optim.AdamW(params, lr=lr, fused=True, ...)`` with the lean step."""
