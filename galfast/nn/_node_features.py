"""Node features in the forms PyG's layers accept besides ``[N, F]``: a static batch
``[B, N, F]`` of feature sets on one graph (PyG's ``node_dim=-2``), and sparse ``x``."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from galfast.graph import Graph
from galfast.ops import aggregate as fused_aggregate

_HALF = (torch.bfloat16, torch.float16)


def aggregate(graph: Graph, x: Tensor, weight: Optional[Tensor] = None, **kwargs) -> Tensor:
    """:func:`galfast.ops.aggregate`, also for a half-precision ``x`` under CPU autocast (a
    Linear there outputs bfloat16 / float16, which the CPU kernels do not take): summed in
    float32 and returned in ``x``'s dtype, as PyG's scatter returns it. The CUDA kernels take
    half types themselves."""
    if x.dtype not in _HALF or x.device.type != "cpu" or not torch.is_autocast_enabled("cpu"):
        return fused_aggregate(graph, x, weight, **kwargs)
    weight = None if weight is None else weight.float()
    return fused_aggregate(graph, x.float(), weight, **kwargs).to(x.dtype)


def aggregate_nodes(graph: Graph, x: Tensor, weight: Optional[Tensor] = None, **kwargs) -> Tensor:
    """:func:`galfast.ops.aggregate` over the node dimension -2 of a ``[N, F]`` or
    ``[B, N, F]`` tensor (the B feature sets ride along as extra features: one kernel call)."""
    if x.dim() == 2:
        return aggregate(graph, x, weight, **kwargs)
    if x.dim() != 3:
        raise ValueError(f"x must be [num_nodes, F] or [batch, num_nodes, F], got {list(x.shape)}")
    batch, nodes, features = x.shape
    flat = x.transpose(0, 1).reshape(nodes, batch * features)
    out = aggregate(graph, flat, weight, **kwargs)
    return out.view(-1, batch, features).transpose(0, 1)


def linear(module: torch.nn.Linear, x: Tensor) -> Tensor:
    """``module(x)``, also for a sparse ``x`` (torch.nn.Linear refuses sparse inputs)."""
    if not x.is_sparse:
        return module(x)
    out = torch.sparse.mm(x, module.weight.t())
    return out if module.bias is None else out + module.bias
