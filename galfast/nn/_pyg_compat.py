"""What galfast's layers share to stand in for PyG's: the message-passing options PyG's
constructors take, lazy ``in_channels=-1``, and clear refusals of PyG-internal machinery.

PyG's layers are ``MessagePassing`` modules: a generic ``propagate`` that calls ``message``,
``aggregate`` and ``update`` with hooks between them, a TorchScript template, and an explain
mode that multiplies every message by an edge mask. galfast's layers run one fused kernel per
aggregation and never build per-edge messages, so none of that has anything to hook into; each
such entry point raises a ``NotImplementedError`` saying so (listed in docs/pyg_compat.md)
rather than being missing (an ``AttributeError``) or, worse, silently doing nothing.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch
from torch import Tensor

from galfast.nn._graph_input import FLOWS
from galfast.nn._lazy_linear import LazyLinear

__all__ = ["FusedLayer", "make_linear", "reset_module"]

_NO_MESSAGES = (
    "galfast's {layer} runs one fused kernel and builds no per-edge messages, so PyG's "
    "{what} has nothing to act on; use torch_geometric.nn.{layer} where you need it "
    "(see docs/pyg_compat.md)"
)
_HOOKS = (
    "register_propagate_forward_pre_hook",
    "register_propagate_forward_hook",
    "register_message_forward_pre_hook",
    "register_message_forward_hook",
    "register_aggregate_forward_pre_hook",
    "register_aggregate_forward_hook",
    "register_message_and_aggregate_forward_pre_hook",
    "register_message_and_aggregate_forward_hook",
    "register_edge_update_forward_pre_hook",
    "register_edge_update_forward_hook",
)
_INTERNALS = ("propagate", "message", "aggregate", "update", "message_and_aggregate")


def make_linear(
    in_channels: int,
    out_channels: int,
    bias: bool,
    weight_initializer: Optional[str] = None,
) -> torch.nn.Module:
    """A ``torch.nn.Linear``, or for ``in_channels=-1`` a :class:`LazyLinear` that draws, on
    its first input, ``weight_initializer`` (PyG's name for the layer's ``Linear``), as PyG's
    lazy ``Linear`` does (same state-dict keys: ``weight`` and ``bias``)."""
    if in_channels == -1:
        return LazyLinear(out_channels, bias=bias, weight_initializer=weight_initializer)
    return torch.nn.Linear(in_channels, out_channels, bias=bias)


def reset_module(value: Any) -> None:
    """PyG's ``inits.reset``: resets a module, or else each of its children (a Sequential has
    no reset of its own); a callable that is no module (PyG takes one as ``nn``) has none."""
    if hasattr(value, "reset_parameters"):
        value.reset_parameters()
    else:
        for child in value.children() if hasattr(value, "children") else []:
            reset_module(child)


def _refusal(layer: str, what: str) -> Callable[..., Any]:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise NotImplementedError(_NO_MESSAGES.format(layer=layer, what=what))

    return refuse


class Unscriptable(torch.nn.Module):
    """A layer on galfast's kernels, which ``torch.jit.script`` cannot compile: it is refused
    by name rather than with a TorchScript error from deep inside the layer."""

    def __prepare_scriptable__(self) -> torch.nn.Module:
        # torch.jit.script calls this on every module before compiling it.
        raise NotImplementedError(
            f"galfast's {type(self).__name__} cannot be compiled by torch.jit.script (its kernels "
            "are torch.library custom ops with Python launchers); use torch.compile or "
            "torch.export, which trace them (see docs/pyg_compat.md)"
        )


class FusedLayer(Unscriptable):
    """Base of the PyG-compatible layers.

    Takes the ``MessagePassing`` options PyG's constructors pass through ``**kwargs``:
    ``flow`` is honoured (``"target_to_source"`` reads ``edge_index[1]`` as the sources; it may
    also be set as an attribute later, as in PyG); ``aggr``, ``node_dim`` and
    ``decomposed_layers`` are accepted at the values the fused layer computes and refused
    otherwise.
    """

    _default_aggr = "add"  # what PyG's layer aggregates with
    _default_node_dim = -2

    def __init__(self, flow: str = "source_to_target", **kwargs: Any) -> None:
        super().__init__()
        name = type(self).__name__
        if flow not in FLOWS:
            raise ValueError(f"flow must be one of {FLOWS}, got {flow!r}")
        allowed = {
            "aggr": (self._default_aggr, "sum" if self._default_aggr == "add" else None),
            "node_dim": (self._default_node_dim, 0),
            "decomposed_layers": (1,),
            "aggr_kwargs": (None, {}),
        }
        for key, value in kwargs.items():
            if key not in allowed:
                raise TypeError(f"{name}.__init__() got an unexpected keyword argument {key!r}")
            if key == "aggr_kwargs" and value not in allowed[key]:
                raise ValueError(
                    f"galfast's {name} aggregates in a fused kernel and takes no aggr_kwargs "
                    "(PyG's configurable aggregations; see docs/pyg_compat.md)"
                )
            if value not in allowed[key]:
                raise ValueError(
                    f"galfast's {name} computes {key}={allowed[key][0]!r} in a fused kernel; "
                    f"{key}={value!r} is not supported (see docs/pyg_compat.md)"
                )
        self.flow = flow

    def __getattr__(self, attr: str) -> Any:
        if attr in _HOOKS or attr in _INTERNALS:
            return _refusal(type(self).__name__, f"MessagePassing.{attr}")
        return super().__getattr__(attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        if attr == "decomposed_layers" and value != 1:
            raise NotImplementedError(
                _NO_MESSAGES.format(layer=type(self).__name__, what="decomposed_layers")
            )
        if attr == "explain" and value:
            raise NotImplementedError(
                _NO_MESSAGES.format(layer=type(self).__name__, what="explain mode (edge masks)")
            )
        super().__setattr__(attr, value)

    def _materialize(self, *pairs: tuple[torch.nn.Module, Tensor]) -> None:
        """For ``in_channels=-1``: sizes each still-lazy linear map from the features it will
        see, in the order given: the order PyG's forward first calls its maps in. Each draws
        only its own parameters, as PyG's lazy ``Linear``, so the generator ends where PyG's
        does."""
        for module, x in pairs:
            if isinstance(module, LazyLinear) and module.is_lazy:
                module.initialize(x)

    def __repr__(self) -> str:
        # PyG's form, e.g. "GCNConv(16, 32)": the layer's arguments, not its submodules.
        try:
            return f"{type(self).__name__}({self.extra_repr()})"
        except AttributeError:  # a constructor that raised before setting the attributes
            return f"<{type(self).__name__} (not initialised)>"
