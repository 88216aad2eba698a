"""Plain-PyTorch reference for galfast.ops.bilinear_edge_scores (tests only): one einsum over
the gathered rows, differentiated by autograd."""

from __future__ import annotations

import torch
from torch import Tensor


def bilinear_edge_scores_ref(
    z: Tensor, src: Tensor, dst: Tensor, bases: Tensor, coefficients: Tensor
) -> Tensor:
    """``out[b, r] = sum_s coefficients[r, s] * z[src[b]] @ bases[s] @ z[dst[b]]``."""
    return torch.einsum("bd,sde,be,rs->br", z[src.long()], bases, z[dst.long()], coefficients)


def bilinear_edge_scores_grads_ref(
    grad: Tensor, z: Tensor, src: Tensor, dst: Tensor, bases: Tensor, coefficients: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """(grad_z, grad_bases, grad_coefficients) of the reference for ``dL/dout = grad``."""
    leaves = [t.detach().clone().requires_grad_() for t in (z, bases, coefficients)]
    out = bilinear_edge_scores_ref(leaves[0], src, dst, leaves[1], leaves[2])
    return torch.autograd.grad(out, leaves, grad, allow_unused=True, materialize_grads=True)
