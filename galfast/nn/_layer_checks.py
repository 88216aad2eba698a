"""Checks a layer runs on its own arguments, so a user's mistake is a ValueError naming the
argument rather than a shape error from deep inside ``torch.nn.Linear``."""

from __future__ import annotations

import torch
from torch import Tensor


def check_channels(in_channels: int, out_channels: int, minimum_out: int = 0) -> None:
    """Channel counts must be ints; ``out_channels`` at least ``minimum_out``."""
    for name, value, low in (
        ("in_channels", in_channels, 0),
        ("out_channels", out_channels, minimum_out),
    ):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{name} must be an int, got {type(value).__name__}")
        if value < low:
            raise ValueError(f"{name} must be >= {low}, got {value}")


def check_features(x: Tensor, in_channels: int, weight: Tensor) -> None:
    """``x`` must be ``[num_nodes, in_channels]`` in the dtype of the layer's ``weight``."""
    if not isinstance(x, Tensor):
        raise ValueError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2 or x.size(1) != in_channels:
        raise ValueError(
            f"x must be a [num_nodes, {in_channels}] tensor (in_channels), "
            f"got shape {list(x.shape)}"
        )
    # Under autocast a Linear casts x itself, so only a clash autocast would not resolve counts.
    autocast = x.is_floating_point() and torch.is_autocast_enabled(x.device.type)
    if x.dtype != weight.dtype and not autocast:
        raise ValueError(
            f"x has dtype {x.dtype} but the layer's parameters are {weight.dtype}; convert one "
            "(e.g. x.to(torch.float32) or layer.to(x.dtype))"
        )
