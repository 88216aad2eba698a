"""Plain-PyTorch references for galfast.ops.aggregate and Graph building (tests only)."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor


def coalesce_ref(src: list[int], dst: list[int], weight: Optional[list[float]] = None):
    """Unique (src, dst) pairs sorted by (dst, src) with summed weights, by a Python dict."""
    merged: dict[tuple[int, int], float] = {}
    for k, (s, d) in enumerate(zip(src, dst)):
        merged[(d, s)] = merged.get((d, s), 0.0) + (1.0 if weight is None else weight[k])
    keys = sorted(merged)
    return [s for _, s in keys], [d for d, _ in keys], [merged[k] for k in keys]


def aggregate_ref(
    num_nodes: int,
    src: Tensor,
    dst: Tensor,
    x: Tensor,
    weight: Optional[Tensor] = None,
    reduce: str = "sum",
    norm: Optional[str] = None,
) -> Tensor:
    """out[i] = reduce_{j -> i} w_ij x_j over a duplicate-free edge list, by index_add/scatter."""
    deg = torch.bincount(dst, minlength=num_nodes).to(x.dtype)
    w = (
        torch.ones(src.numel(), dtype=x.dtype, device=x.device)
        if weight is None
        else weight.to(x.dtype)
    )
    if norm == "gcn":
        inv_sqrt = deg.rsqrt().masked_fill(deg == 0, 0.0)
        w = w * inv_sqrt[src] * inv_sqrt[dst]
    msgs = w.unsqueeze(1) * x[src]
    if reduce == "max":
        out = x.new_zeros(num_nodes, x.size(1))
        index = dst.unsqueeze(1).expand_as(msgs)
        out = out.scatter_reduce(0, index, msgs, "amax", include_self=False)
        return out
    out = x.new_zeros(num_nodes, x.size(1)).index_add(0, dst, msgs)
    if reduce == "mean":
        out = out / deg.clamp(min=1).unsqueeze(1)
    return out
