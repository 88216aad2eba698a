"""An attacker head's parameters and gradients as views of two flat buffers.

Adam's update is elementwise, so running it once on one buffer computes every parameter's
numbers exactly as running it on each parameter: each ``_foreach`` call then dispatches one
tensor instead of one per layer (a head's step is small enough that those dispatches cost
about as much as its arithmetic), and the early-stopping snapshot is one copy.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["flatten_parameters", "unflatten_parameters"]

# torch's CPU allocator aligns every tensor to 64 bytes. Starting each view on such a boundary
# keeps the matrix products' operands aligned as fresh tensors are (MKL's kernels may sum in
# another order for another alignment).
_ALIGN_BYTES = 64


def flatten_parameters(model: nn.Module) -> Tensor:
    """Moves ``model``'s parameters into one flat tensor (each parameter becomes a view of it,
    with its value) and their gradients into another (each ``p.grad`` a view of it, zero),
    and returns the first with the second as its ``.grad``. The padding between views stays
    zero under Adam (zero gradient, zero moments, zero value)."""
    params = list(model.parameters())
    if not params or len({(p.dtype, p.device) for p in params}) != 1:
        raise ValueError("flatten_parameters needs parameters of one dtype on one device")
    align = max(1, _ALIGN_BYTES // params[0].element_size())
    starts, total = [], 0
    for p in params:
        starts.append(total)
        total += -(-p.numel() // align) * align
    flat = torch.zeros(total, dtype=params[0].dtype, device=params[0].device)
    grad = torch.zeros_like(flat)
    for p, start in zip(params, starts):
        rows = slice(start, start + p.numel())
        flat[rows].copy_(p.detach().reshape(-1))
        p.data = flat[rows].view(p.shape)
        p.grad = grad[rows].view(p.shape)
    flat.grad = grad
    return flat


def unflatten_parameters(model: nn.Module) -> None:
    """Gives each of ``model``'s parameters its own storage again (same values) and drops the
    gradient views: a fitted head outlives its training buffers, and one pickled (a worker
    process sends its heads back) would otherwise carry the whole flat buffer once per
    parameter."""
    for p in model.parameters():
        p.data = p.data.clone()
        p.grad = None
