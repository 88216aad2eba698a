"""Row-wise bilinear forms against a few shared matrices, ``z_src[b] @ bases[s] @ z_dst[b]``.

What ``torch.einsum("bd,sde,be->bs", z_src, bases, z_dst)`` computes. einsum's backward is
batched matrix products of one row each, slow on the CPU (GC-MC's decoder on MovieLens:
8,192 rows x 2 bases of 20 x 20, 4.2 ms of a training step). Here ``z_src`` meets all bases
in one matrix multiply with the bases side by side, and the row-wise dot products with
``z_dst`` have a backward of element-wise products over the S (a few) bases.
"""

from __future__ import annotations

import torch
from torch import Tensor

from galfast import ops

__all__ = ["bilinear_forms"]


def bilinear_forms(z_src: Tensor, bases: Tensor, z_dst: Tensor) -> Tensor:
    """``[B, D]``, ``[S, D, E]``, ``[B, E]`` -> ``[B, S]``: entry ``(b, s)`` is
    ``z_src[b] @ bases[s] @ z_dst[b]``. Differentiable twice in every input."""
    if z_src.dim() != 2 or bases.dim() != 3 or z_dst.dim() != 2 or bases.size(0) < 1:
        raise ValueError(
            f"need z_src [B, D], bases [S >= 1, D, E], z_dst [B, E]; got {list(z_src.shape)}, "
            f"{list(bases.shape)}, {list(z_dst.shape)}"
        )
    if (
        z_src.size(0) != z_dst.size(0)
        or z_src.size(1) != bases.size(1)
        or z_dst.size(1) != bases.size(2)
    ):
        raise ValueError(
            f"shapes do not match: z_src {list(z_src.shape)}, bases {list(bases.shape)}, "
            f"z_dst {list(z_dst.shape)}"
        )
    num_bases, _, cols = bases.shape
    projected = (z_src @ _side_by_side(bases)).view(z_src.size(0), num_bases, cols)
    if torch._C._are_functorch_transforms_active():  # torch.func runs no ctx-in-forward Function
        return torch.bmm(projected, z_dst.unsqueeze(2)).squeeze(2)
    return _RowDots.apply(projected, z_dst)


def _side_by_side(bases: Tensor) -> Tensor:
    """``[S, D, E]`` -> ``[D, S * E]``, column ``s * E + e`` holding ``bases[s][:, e]``."""
    num_bases, rows, cols = bases.shape
    return bases.transpose(0, 1).reshape(rows, num_bases * cols)


class _RowDots(torch.autograd.Function):
    """``[B, S, E]``, ``[B, E]`` -> ``[B, S]``: ``out[b, s] = vectors[b, s] . z[b]``.

    Autograd's backward of the forward's batched product is two more batched products of one
    row each (an outer product and a 1 x S by S x E product per row), 5-7x slower than the
    element-wise forms below."""

    @staticmethod
    def forward(ctx, vectors: Tensor, z: Tensor) -> Tensor:
        ctx.save_for_backward(vectors, z)
        return torch.bmm(vectors, z.unsqueeze(2)).squeeze(2)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple:
        vectors, z = ctx.saved_tensors
        if (
            ctx.needs_input_grad[0]
            and ctx.needs_input_grad[1]
            and not torch.is_grad_enabled()  # the kernel records no graph for a double backward
            and vectors.dtype == z.dtype == grad.dtype
        ):
            return ops.row_dot_grads(vectors, z, grad)  # both in one pass, the same roundings
        grad_vectors = grad_z = None
        if ctx.needs_input_grad[0]:
            grad_vectors = _outer_rows(grad, z)
        if ctx.needs_input_grad[1]:
            # sum_s grad[b, s] * vectors[b, s]: one fused multiply-add per basis (a reduction
            # over the middle dimension is several times slower).
            grad_z = vectors[:, 0] * grad[:, :1]
            for s in range(1, vectors.size(1)):
                grad_z = torch.addcmul(grad_z, vectors[:, s], grad[:, s : s + 1])
        return grad_vectors, grad_z


def _outer_rows(grad: Tensor, z: Tensor) -> Tensor:
    """``[B, S]``, ``[B, E]`` -> ``[B, S, E]``: ``grad[b, s] * z[b]``. Outside a graph being
    recorded, one product per basis written into its slice (MovieLens: 1.5x faster than the
    broadcast ``[B, S, 1] x [B, 1, E]`` product, the same values: one rounding each);
    ``out=`` records no graph, so the double backward takes the broadcast, and torch.compile
    cannot trace an ``out=`` into a strided slice, so a compiled backward takes it too."""
    if torch.is_grad_enabled() or torch.compiler.is_compiling():
        return grad.unsqueeze(2) * z.unsqueeze(1)
    out = grad.new_empty(grad.size(0), grad.size(1), z.size(1))
    for s in range(grad.size(1)):
        torch.mul(z, grad[:, s : s + 1], out=out[:, s])
    return out
