"""Plain-PyTorch reference of galfast.ops.gat_aggregate (used only by tests): builds the
per-edge tensors the fused kernel avoids and runs a scatter softmax over them."""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

import galfast


def gat_aggregate_reference(
    graph: galfast.Graph,
    h: Tensor,
    alpha_src: Tensor,
    alpha_dst: Tensor,
    negative_slope: float = 0.2,
    keep: Optional[Tensor] = None,
) -> Tensor:
    """``[N, H, F]``; `keep` is an optional ``[E, H]`` dropout factor per CSR edge."""
    src, dst = graph.col, graph.row
    n, heads = h.size(0), h.size(1)
    logits = F.leaky_relu(alpha_src[src] + alpha_dst[dst], negative_slope)  # [E, H]
    index = dst[:, None].expand_as(logits)
    row_max = torch.full((n, heads), -torch.inf, dtype=h.dtype, device=h.device).scatter_reduce(
        0, index, logits, "amax"
    )
    unnormalised = (logits - row_max[dst]).exp()
    row_sum = torch.zeros(n, heads, dtype=h.dtype, device=h.device).index_add(0, dst, unnormalised)
    attention = unnormalised / row_sum[dst]
    if keep is not None:
        attention = attention * keep
    return torch.zeros_like(h).index_add(0, dst, attention[:, :, None] * h[src])
