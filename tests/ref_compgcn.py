"""Plain-PyTorch references for galfast.ops.compgcn_aggregate and galfast.nn.CompGCNConv (tests
only): per-edge messages materialised, then summed with index_add, as CompGCN's authors do."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor


def ccorr_ref(a: Tensor, b: Tensor) -> Tensor:
    """Circular correlation by its definition, out[..., k] = sum_l a[..., l] b[..., (l + k) % F]
    (no FFT: an independent check of the spectral path)."""
    F = a.size(-1)
    index = (torch.arange(F).view(F, 1) + torch.arange(F).view(1, F)) % F  # [k, l] -> l + k
    return torch.einsum("...l,...kl->...k", a, b[..., index])


def compose_ref(a: Tensor, b: Tensor, composition: str) -> Tensor:
    if composition == "sub":
        return a - b
    if composition == "mult":
        return a * b
    return ccorr_ref(a, b)


def gcn_edge_norm_ref(src: Tensor, dst: Tensor, num_nodes: int, dtype) -> Tensor:
    """CompGCN's compute_norm: 1/sqrt(d(dst) d(src)) with d the in-degree (the count of edges
    aggregated at a node) of this edge list, 0 where a degree is 0."""
    deg = torch.bincount(dst, minlength=num_nodes).to(dtype)
    inv = deg.pow(-0.5)
    inv[torch.isinf(inv)] = 0
    return inv[dst] * inv[src]


def compgcn_aggregate_ref(
    num_nodes: int,
    src: Tensor,
    dst: Tensor,
    edge_type: Tensor,
    x: Tensor,
    rel: Tensor,
    composition: str,
    weight: Optional[Tensor] = None,
    norm: Optional[str] = None,
) -> Tensor:
    """out[i] = sum over edges (j, r, i) of w * phi(x[j], rel[r]), parallel edges counted."""
    w = torch.ones(src.numel(), dtype=x.dtype) if weight is None else weight.to(x.dtype)
    if norm == "gcn":
        w = w * gcn_edge_norm_ref(src, dst, num_nodes, x.dtype)
    msgs = compose_ref(x[src], rel[edge_type], composition) * w.unsqueeze(1)
    return x.new_zeros(num_nodes, x.size(1)).index_add(0, dst, msgs)
