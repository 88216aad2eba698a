"""The linear map of a lazy layer (``in_channels=-1``), initialised as PyG's lazy ``Linear``.

torch's ``LazyLinear`` draws its own kaiming initialisation when it learns its input width,
so a layer built on it would have to draw every parameter again to reach PyG's
distributions, and the same seed would give other weights than PyG's layer and leave the
generator elsewhere. PyG's ``torch_geometric.nn.Linear`` instead draws, on its first input,
only its own weight (then bias) with the layer's initializer; this module does exactly that,
with PyG's formulas, and saves and loads its state as PyG's does (an uninitialised weight in
the state dict makes it lazy again), so the two layers exchange state dicts either way.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import torch
from torch import Tensor
from torch.nn.parameter import UninitializedParameter, is_lazy

__all__ = ["LazyLinear"]

_WEIGHT_INITIALIZERS = ("glorot", "uniform", "kaiming_uniform", None)
_BIAS_INITIALIZERS = ("zeros", None)


class LazyLinear(torch.nn.Linear):
    """``torch.nn.Linear(in_features, out_features)`` whose ``in_features`` is the width of
    its first input (or of the features :meth:`initialize` is given).

    Args:
        out_features: output width.
        bias: learn an additive bias.
        weight_initializer: PyG's names: ``"glorot"``, ``"uniform"``, ``"kaiming_uniform"``
            or None (torch.nn.Linear's distribution).
        bias_initializer: ``"zeros"`` or None (torch.nn.Linear's distribution).
    """

    def __init__(
        self,
        out_features: int,
        bias: bool = True,
        weight_initializer: Optional[str] = None,
        bias_initializer: Optional[str] = None,
    ) -> None:
        # torch.nn.Linear's own constructor would allocate and draw a weight of a known width.
        torch.nn.Module.__init__(self)
        if weight_initializer not in _WEIGHT_INITIALIZERS:
            raise ValueError(f"weight_initializer must be one of {_WEIGHT_INITIALIZERS}")
        if bias_initializer not in _BIAS_INITIALIZERS:
            raise ValueError(f"bias_initializer must be one of {_BIAS_INITIALIZERS}")
        self.in_features, self.out_features = 0, out_features
        self.weight_initializer, self.bias_initializer = weight_initializer, bias_initializer
        self.weight = UninitializedParameter()
        # A real tensor from the start, as PyG's (its state-dict entry has the final shape);
        # zeros rather than PyG's uninitialised memory, and no draw until the width is known.
        self.bias = torch.nn.Parameter(torch.zeros(out_features)) if bias else None
        self._initialize_hook = self.register_forward_pre_hook(self._initialize_on_call)

    @property
    def is_lazy(self) -> bool:
        """True until the input width is known."""
        return is_lazy(self.weight)

    def reset_parameters(self) -> None:
        """Draws the weight, then the bias, with the initializers (nothing while lazy)."""
        if self.is_lazy:
            return
        fan_in = self.in_features
        if self.weight_initializer == "glorot":
            bound = math.sqrt(6.0 / (self.weight.size(-2) + self.weight.size(-1)))
        elif self.weight_initializer == "uniform":
            bound = 1.0 / math.sqrt(fan_in)
        else:  # kaiming_uniform with a = sqrt(5), torch.nn.Linear's
            bound = math.sqrt(6 / ((1 + math.sqrt(5) ** 2) * fan_in))
        self.weight.data.uniform_(-bound, bound)
        if self.bias is None:
            return
        if self.bias_initializer == "zeros":
            self.bias.data.zero_()
        else:
            bound = 1.0 / math.sqrt(fan_in)
            self.bias.data.uniform_(-bound, bound)

    @torch.no_grad()
    def initialize(self, x: Tensor) -> None:
        """Learns ``in_features`` from ``x``'s last dimension and initialises the parameters
        (a no-op once initialised)."""
        if not self.is_lazy:
            return
        self.in_features = x.size(-1)
        self.weight.materialize((self.out_features, self.in_features))
        self.reset_parameters()
        self._drop_hook()

    def _initialize_on_call(self, _module: Any, args: tuple) -> None:
        self.initialize(args[0])

    def _drop_hook(self) -> None:
        # After the first call the forward runs without any hook (torch's fast path).
        if hasattr(self, "_initialize_hook"):
            self._initialize_hook.remove()
            del self._initialize_hook

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        # An uninitialised parameter has no data to detach: it is saved as it is, as PyG does.
        if self.is_lazy:
            destination[prefix + "weight"] = self.weight
            if self.bias is not None:
                destination[prefix + "bias"] = self.bias if keep_vars else self.bias.detach()
            return
        super()._save_to_state_dict(destination, prefix, keep_vars)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args: Any, **kwargs: Any):
        weight = state_dict.get(prefix + "weight")
        if weight is not None and is_lazy(weight):
            # A lazy layer's state: this map becomes lazy again, as PyG's Linear does.
            self.in_features = 0
            self.weight = UninitializedParameter(device=self.weight.device, dtype=self.weight.dtype)
            if not hasattr(self, "_initialize_hook"):
                self._initialize_hook = self.register_forward_pre_hook(self._initialize_on_call)
        elif weight is not None and self.is_lazy:
            # A materialised state: take its width (the values are copied below).
            self.in_features = weight.size(-1)
            self.weight.materialize((self.out_features, self.in_features))
            self._drop_hook()
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
