"""Plain-PyTorch reference for galfast.ops.row_dot_grads (tests only): the products one by
one, and grad_z's fused multiply-adds emulated exactly for float32 in float64 (a float32
product is exact in float64; the sum is rounded once to float64 and then to float32, which
differs from a true fma only on double-rounding ties, absent from the tests' data)."""

from __future__ import annotations

import torch
from torch import Tensor


def row_dot_grads_ref(vectors: Tensor, z: Tensor, grad: Tensor) -> tuple[Tensor, Tensor]:
    """(grad[b, s] * z[b] as [B, S, E], the first product then fma per further s as [B, E]);
    float32 inputs."""
    assert vectors.dtype == torch.float32
    grad_vectors = torch.stack(
        [torch.mul(z, grad[:, s : s + 1]) for s in range(vectors.size(1))], dim=1
    )
    grad_z = torch.mul(vectors[:, 0], grad[:, :1])
    for s in range(1, vectors.size(1)):
        exact = vectors[:, s].double() * grad[:, s : s + 1].double() + grad_z.double()
        grad_z = exact.float()
    return grad_vectors, grad_z
