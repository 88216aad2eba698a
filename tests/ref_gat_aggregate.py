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
    *,
    alpha_edge: Optional[Tensor] = None,
) -> Tensor:
    """``[num_nodes, H, F]`` (one row per destination); `keep` is an optional ``[E, H]``
    dropout factor and `alpha_edge` an optional ``[E, H]`` logit term per CSR edge."""
    src, dst = graph.col, graph.row
    n, heads = graph.num_nodes, h.size(1)
    pre = alpha_src[src] + alpha_dst[dst]
    if alpha_edge is not None:
        pre = pre + alpha_edge
    logits = F.leaky_relu(pre, negative_slope)  # [E, H]
    index = dst[:, None].expand_as(logits)
    row_max = torch.full((n, heads), -torch.inf, dtype=h.dtype, device=h.device).scatter_reduce(
        0, index, logits, "amax"
    )
    unnormalised = (logits - row_max[dst]).exp()
    row_sum = torch.zeros(n, heads, dtype=h.dtype, device=h.device).index_add(0, dst, unnormalised)
    attention = unnormalised / row_sum[dst]
    if keep is not None:
        attention = attention * keep
    out = h.new_zeros(n, heads, h.size(2))
    return out.index_add(0, dst, attention[:, :, None] * h[src])
