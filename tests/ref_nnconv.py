"""Plain-PyTorch references for galfast.ops.nnconv_aggregate, galfast.nn.Set2Set and the MPNN
(tests only): every per-edge matrix built explicitly."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor


def nnconv_aggregate_ref(
    num_nodes: int,
    src: Tensor,
    dst: Tensor,
    x: Tensor,
    edge_hidden: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    reduce: str = "sum",
) -> Tensor:
    """out[v] = reduce_{e = (u -> v)} x_u @ reshape(weight h_e + bias, [F_in, F_out]), parallel
    edges separate, 0 for a node without incoming edges."""
    in_features = x.size(1)
    out_features = weight.size(0) // in_features
    theta = edge_hidden @ weight.t()
    if bias is not None:
        theta = theta + bias
    theta = theta.view(-1, in_features, out_features)
    messages = torch.bmm(x[src].unsqueeze(1), theta).squeeze(1)
    out = x.new_zeros(num_nodes, out_features).index_add(0, dst, messages)
    if reduce == "mean":
        degree = torch.bincount(dst, minlength=num_nodes).clamp(min=1).to(x.dtype)
        out = out / degree.unsqueeze(1)
    return out
