"""Gradients of row-wise dot products, ``out[b, s] = vectors[b, s] . z[b]`` (csrc/rowdots):
the rating decoder's backward (galfast/models/bilinear_forms.py; MovieLens: 8,192 rows x 2
bases x 20), in one pass over the rows instead of torch's broadcast product and a
multiply-add per vector, with the same roundings (bitwise the same gradients; see
csrc/rowdots/row_dots.h)."""

from __future__ import annotations

import torch
from torch import Tensor

from galfast._dtypes import CPU_DTYPES, kernel_dtype
from galfast._native import _C
from galfast.ops._eager import tracing
from galfast.ops._functorch import transforms_active
from galfast.ops._launch import kernel_op, ptr, run_kernel

__all__ = ["row_dot_grads"]


def _row_dot_grads_outputs(vectors: Tensor, z: Tensor) -> tuple[Tensor, Tensor]:
    """(grad_vectors like vectors, grad_z like z)."""
    return vectors.new_empty(vectors.shape), z.new_empty(z.shape)


def _row_dot_grads(vectors: Tensor, z: Tensor, grad: Tensor) -> tuple[Tensor, Tensor]:
    grad_vectors, grad_z = _row_dot_grads_outputs(vectors, z)
    p = _C.RowDotsBackwardParams()
    p.vectors, p.z, p.grad = ptr(vectors), ptr(z), ptr(grad)
    p.grad_vectors, p.grad_z = ptr(grad_vectors), ptr(grad_z)
    p.rows, p.num_vectors, p.width = vectors.shape
    p.dtype = kernel_dtype(vectors.dtype)
    run_kernel("row_dots_backward", p, vectors.device)
    return grad_vectors, grad_z


_row_dot_grads_op = kernel_op("row_dots_backward", _row_dot_grads, _row_dot_grads_outputs)


def _check_inputs(vectors, z, grad) -> None:
    for name, t in (("vectors", vectors), ("z", z), ("grad", grad)):
        if not isinstance(t, Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if vectors.dim() != 3 or vectors.size(1) < 1:
        raise ValueError(f"vectors must have shape [B, S >= 1, E], got {list(vectors.shape)}")
    rows, num_vectors, width = vectors.shape
    if tuple(z.shape) != (rows, width) or tuple(grad.shape) != (rows, num_vectors):
        raise ValueError(
            f"need z [B, E] = [{rows}, {width}] and grad [B, S] = [{rows}, {num_vectors}] "
            f"for vectors {list(vectors.shape)}; got z {list(z.shape)}, grad {list(grad.shape)}"
        )
    if z.dtype != vectors.dtype or grad.dtype != vectors.dtype:
        raise ValueError(
            f"vectors, z and grad must share a dtype; got {vectors.dtype}, {z.dtype}, {grad.dtype}"
        )
    if z.device != vectors.device or grad.device != vectors.device:
        raise ValueError(
            f"vectors, z and grad must be on one device; got {vectors.device}, {z.device}, "
            f"{grad.device}"
        )


def row_dot_grads(vectors: Tensor, z: Tensor, grad: Tensor) -> tuple[Tensor, Tensor]:
    r"""The gradients of ``out[b, s] = vectors[b, s] . z[b]`` given ``grad = dL/dout``:

    .. math::
        \frac{\partial L}{\partial \mathrm{vectors}_{bse}} = g_{bs} z_{be}, \qquad
        \frac{\partial L}{\partial z_{be}} = \sum_s g_{bs}\, \mathrm{vectors}_{bse}

    ``grad_z`` starts from the rounded product for s = 0 and adds each further one by a fused
    multiply-add, in increasing s: bitwise what ``grad.unsqueeze(2) * z.unsqueeze(1)`` and
    ``vectors[:, 0] * grad[:, :1]`` followed by ``addcmul`` per further s give where torch's
    CPU addcmul fuses its multiply-add (it does on the AVX-512 and AVX2 builds measured).
    Not differentiable (a backward's building block); float32 / float64 on the CPU, torch's
    forms elsewhere.

    Args:
        vectors: ``[B, S, E]``.
        z: ``[B, E]``.
        grad: ``[B, S]``.

    Returns:
        ``(grad_vectors [B, S, E], grad_z [B, E])``.
    """
    _check_inputs(vectors, z, grad)
    if vectors.device.type != "cpu" or vectors.dtype not in CPU_DTYPES:
        grad_z = vectors[:, 0] * grad[:, :1]
        for s in range(1, vectors.size(1)):
            grad_z = torch.addcmul(grad_z, vectors[:, s], grad[:, s : s + 1])
        return grad.unsqueeze(2) * z.unsqueeze(1), grad_z
    args = (vectors.contiguous(), z.contiguous(), grad.contiguous())
    traced = tracing() or transforms_active()  # torch.func: the op, which vmaps
    return _row_dot_grads_op(*args) if traced else _row_dot_grads(*args)
