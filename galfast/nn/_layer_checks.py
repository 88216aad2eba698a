"""Checks a layer runs on its own arguments, so a user's mistake is a ValueError naming the
argument rather than a shape error from deep inside ``torch.nn.Linear``."""

from __future__ import annotations

from typing import Any, Optional, Union

import torch
from torch import Tensor

from galfast._args import check_int

Channels = Union[int, tuple[int, int]]


def check_channels(
    in_channels: Any,
    out_channels: Any,
    minimum_out: int = 0,
    *,
    lazy: bool = False,
    pair: bool = False,
) -> tuple[Channels, int]:
    """``(in_channels, out_channels)`` as Python ints (``in_channels`` as a tuple of two for a
    pair); out_channels at least ``minimum_out``. With ``lazy``, ``in_channels=-1`` (inferred
    on the first call, as PyG's ``Linear``) is allowed; with ``pair``, a ``(source,
    destination)`` pair for bipartite inputs."""
    low = -1 if lazy else 0
    if pair and isinstance(in_channels, (tuple, list)):
        if len(in_channels) != 2:
            raise ValueError(
                f"in_channels must be an int or a (source, destination) pair, got {in_channels}"
            )
        in_channels = tuple(
            check_int(f"in_channels ({side})", value, low)
            for side, value in zip(("source", "destination"), in_channels)
        )
    else:
        if isinstance(in_channels, (tuple, list)):
            raise ValueError(
                "this layer takes one node set: in_channels must be an int, got "
                f"{tuple(in_channels)}"
            )
        in_channels = check_int("in_channels", in_channels, low)
    return in_channels, check_int("out_channels", out_channels, minimum_out)


def check_callable(name: str, value: Any) -> Any:
    """``value`` unless it cannot be called (PyG takes any callable where it takes a
    network; anything else would fail at the first forward, or in reset_parameters)."""
    if not callable(value):
        raise ValueError(
            f"{name} must be callable (e.g. a torch.nn.Module), got {type(value).__name__}"
        )
    return value


def channel_pair(in_channels: Channels) -> tuple[int, int]:
    """``(source, destination)`` channel counts of an int or a pair."""
    if isinstance(in_channels, (tuple, list)):
        return int(in_channels[0]), int(in_channels[1])
    return in_channels, in_channels


def split_features(x: Any, bipartite: bool) -> tuple[Tensor, Optional[Tensor]]:
    """``(x_src, x_dst)`` of a layer's ``x``: a tensor (both sides) or, where the layer takes
    bipartite inputs, a ``(x_src, x_dst)`` pair whose ``x_dst`` may be None."""
    if isinstance(x, (tuple, list)):
        if not bipartite:
            raise ValueError(
                "this layer takes one node set: x must be a tensor, not a (x_src, x_dst) pair"
            )
        if len(x) != 2:
            raise ValueError(f"a bipartite x must be a pair (x_src, x_dst), got {len(x)} items")
        x_src, x_dst = x
        if not isinstance(x_src, Tensor):
            raise ValueError(f"x_src must be a torch.Tensor, got {type(x_src).__name__}")
        if x_dst is not None and not isinstance(x_dst, Tensor):
            raise ValueError(f"x_dst must be a torch.Tensor or None, got {type(x_dst).__name__}")
        return x_src, x_dst
    if not isinstance(x, Tensor):
        raise ValueError(f"x must be a torch.Tensor, got {type(x).__name__}")
    return x, x


def node_counts(
    x_src: Tensor, x_dst: Optional[Tensor], size: Optional[tuple], bipartite_input: bool
) -> tuple[Optional[int], Optional[int]]:
    """``(num_src, num_dst)`` the features (or ``size``, PyG's ``(num_src, num_dst)``) imply;
    ``num_dst`` None when neither says (then :func:`~galfast.nn._graph_input.layer_graph`
    decides, as PyG: the graph's own count, or ``num_src`` for an edge_index)."""
    num_src = x_src.size(-2) if x_src.dim() >= 2 else None
    num_dst = x_dst.size(-2) if x_dst is not None and x_dst.dim() >= 2 else None
    if not bipartite_input:
        num_dst = num_src
    if size is not None:
        if not isinstance(size, (tuple, list)) or len(size) != 2:
            raise ValueError(f"size must be a pair (num_src, num_dst), got {size!r}")
        # int() would truncate a float count, and read a bool as 0 or 1.
        given = [
            None if value is None else check_int(f"size ({name})", value, 0)
            for name, value in zip(("num_src", "num_dst"), size)
        ]
        for name, count, seen in zip(("num_src", "num_dst"), given, (num_src, num_dst)):
            if count is not None and seen is not None and count != seen:
                raise ValueError(f"size gives {name} = {count} but x has {seen} rows")
        num_src = num_src if given[0] is None else given[0]
        num_dst = num_dst if given[1] is None else given[1]
    return num_src, num_dst


def check_features(x: Tensor, in_channels: int, weight: Tensor, name: str = "x") -> None:
    """``x`` must be ``[num_nodes, in_channels]`` in the dtype of the layer's ``weight``."""
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2 or (in_channels >= 0 and x.size(1) != in_channels):
        wanted = in_channels if in_channels >= 0 else "in_channels"
        raise ValueError(
            f"{name} must be a [num_nodes, {wanted}] tensor (in_channels), "
            f"got shape {list(x.shape)}"
        )
    if isinstance(weight, torch.nn.parameter.UninitializedParameter):
        return
    # Under autocast a Linear casts x itself, so only a clash autocast would not resolve counts.
    autocast = x.is_floating_point() and torch.is_autocast_enabled(x.device.type)
    if x.dtype != weight.dtype and not autocast:
        raise ValueError(
            f"{name} has dtype {x.dtype} but the layer's parameters are {weight.dtype}; convert "
            "one (e.g. x.to(torch.float32) or layer.to(x.dtype))"
        )
