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
    steps = torch.arange(F, device=a.device)
    index = (steps.view(F, 1) + steps.view(1, F)) % F  # [k, l] -> l + k
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
    w = x.new_ones(src.numel()) if weight is None else weight.to(x.dtype)
    if norm == "gcn":
        w = w * gcn_edge_norm_ref(src, dst, num_nodes, x.dtype)
    msgs = compose_ref(x[src], rel[edge_type], composition) * w.unsqueeze(1)
    return x.new_zeros(num_nodes, x.size(1)).index_add(0, dst, msgs)


def compgcn_conv_ref(layer, x: Tensor, edge_index: Tensor, edge_type: Tensor, rel: Tensor):
    """CompGCN's layer as its authors wrote it, on `layer`'s parameters: inverse triples
    appended as in their data loader, per-edge messages phi(x_j, z_r) W per direction (x_j read
    at edge_index[1], summed at edge_index[0]), then dropout, mean of three, bias, BN, act.
    Uses `layer.drop` and `layer.bn` (so dropout draws the same masks under the same seed)."""
    num_nodes, R = x.size(0), layer.num_relations
    index = torch.cat([edge_index, edge_index.flip(0)], 1)
    types = torch.cat([edge_type, edge_type + R])
    rel_all = torch.cat([rel, layer.loop_rel])
    half = edge_index.size(1)
    loops = torch.arange(num_nodes).repeat(2, 1)

    def propagate(index, types, weight, norm):
        msgs = compose_ref(x[index[1]], rel_all[types], layer.composition) @ weight
        if norm is not None:
            msgs = msgs * norm.view(-1, 1)
        return x.new_zeros(num_nodes, weight.size(1)).index_add(0, index[0], msgs)

    def norm(index):
        return gcn_edge_norm_ref(index[1], index[0], num_nodes, x.dtype)

    in_index, out_index = index[:, :half], index[:, half:]
    in_res = propagate(in_index, types[:half], layer.w_in, norm(in_index))
    loop_res = propagate(loops, torch.full((num_nodes,), 2 * R), layer.w_loop, None)
    out_res = propagate(out_index, types[half:], layer.w_out, norm(out_index))
    out = layer.drop(in_res) * (1 / 3) + layer.drop(out_res) * (1 / 3) + loop_res * (1 / 3)
    if layer.bias is not None:
        out = out + layer.bias
    if layer.bn is not None:
        out = layer.bn(out)
    if layer.act is not None:
        out = layer.act(out)
    return out, (rel_all @ layer.w_rel)[:-1]
