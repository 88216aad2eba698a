"""Row gather ``x[index]`` along the first dimension, with a deterministic scatter-add
backward (csrc/gather/gather_rows.h): the differentiable op and its public wrapper.

``x.index_select(0, index)`` computes the same rows and, on the CPU, the same gradient bitwise
(its backward is ``index_add_``, which adds each picked row into a zero row in index order, as
the kernel here does). torch's CPU ``index_add_`` runs a TensorIterator per index (about
60 ns of setup for 20 floats of work; MovieLens's rating head: 2 x 8,192 rows a step); the
kernel here gives each thread a range of destination rows and scans the whole index, so every
row is summed by one thread in index order whatever the thread count.

On a GPU, for dtypes other than float32 / float64 and under torch.func transforms, the
wrapper runs ``index_select``."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from galfast._dtypes import CPU_DTYPES, kernel_dtype
from galfast._native import _C
from galfast.ops._eager import eager_function, tracing
from galfast.ops._functorch import transforms_active
from galfast.ops._launch import kernel_op, ptr, run_kernel

__all__ = ["gather_rows"]

_INDEX_DTYPES = (torch.int32, torch.int64)


# ---------------------------------------------------------------- kernels (csrc/gather)
def _params(table: Tensor, index: Tensor, picked: Tensor) -> _C.GatherRowsParams:
    p = _C.GatherRowsParams()
    p.index, p.table, p.picked = ptr(index), ptr(table), ptr(picked)
    p.num_rows, p.num_index = table.size(0), index.numel()
    p.width = math.prod(table.shape[1:])  # picked has the same trailing shape
    p.int32_index = index.dtype == torch.int32
    p.dtype = kernel_dtype(table.dtype)
    return p


def _gather_rows_outputs(x: Tensor, index: Tensor) -> Tensor:
    """``[len(index), *x.shape[1:]]``."""
    return x.new_empty((index.size(0), *x.shape[1:]))


def _gather_rows(x: Tensor, index: Tensor) -> Tensor:
    """picked[k] = x[index[k]]; an index outside [0, len(x)) raises IndexError."""
    picked = _gather_rows_outputs(x, index)
    run_kernel("gather_rows", _params(x, index, picked), x.device)
    return picked


def _scatter_add_rows_outputs(grad: Tensor, index: Tensor, num_rows: int) -> Tensor:
    """``[num_rows, *grad.shape[1:]]``."""
    return grad.new_empty((num_rows, *grad.shape[1:]))


def _scatter_add_rows(grad: Tensor, index: Tensor, num_rows: int) -> Tensor:
    """out[r] = the sum of grad[k] over k with index[k] == r, added in increasing k."""
    out = _scatter_add_rows_outputs(grad, index, num_rows)
    run_kernel("scatter_add_rows", _params(out, index, grad), grad.device)
    return out


_gather_op = kernel_op("gather_rows", _gather_rows, _gather_rows_outputs)
_scatter_op = kernel_op("scatter_add_rows", _scatter_add_rows, _scatter_add_rows_outputs)


# ---------------------------------------------------------------- autograd: each the other's
def _gather_setup(ctx, inputs, output):
    x, index = inputs
    ctx.save_for_backward(index)
    ctx.num_rows = x.size(0)


def _gather_backward(ctx, grad):
    (index,) = ctx.saved_tensors
    if not ctx.needs_input_grad[0]:
        return None, None
    grad = grad.contiguous()
    if not getattr(ctx, "eager", False):
        return _scatter_op(grad, index, ctx.num_rows), None
    if torch.is_grad_enabled():  # create_graph: the scatter-add must be differentiable too
        return _ScatterEager.apply(grad, index, ctx.num_rows), None
    return _scatter_add_rows(grad, index, ctx.num_rows), None


def _scatter_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[1])


def _scatter_backward(ctx, grad):
    (index,) = ctx.saved_tensors
    if not ctx.needs_input_grad[0]:
        return None, None, None
    grad = grad.contiguous()
    if not getattr(ctx, "eager", False):
        return _gather_op(grad, index), None, None
    if torch.is_grad_enabled():
        return _GatherEager.apply(grad, index), None, None
    return _gather_rows(grad, index), None, None


_gather_op.register_autograd(_gather_backward, setup_context=_gather_setup)
_scatter_op.register_autograd(_scatter_backward, setup_context=_scatter_setup)
_GatherEager = eager_function(_gather_rows, _gather_setup, _gather_backward)
_ScatterEager = eager_function(_scatter_add_rows, _scatter_setup, _scatter_backward)


# ---------------------------------------------------------------- public wrapper
def _check_inputs(x, index) -> None:
    if not isinstance(x, Tensor):
        raise ValueError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() < 1:
        raise ValueError("x must have at least one dimension (the rows to gather)")
    if not isinstance(index, Tensor):
        raise ValueError(f"index must be a torch.Tensor, got {type(index).__name__}")
    if index.dim() != 1 or index.dtype not in _INDEX_DTYPES:
        raise ValueError(
            f"index must be a 1-D int32 or int64 tensor, got shape {list(index.shape)} and "
            f"dtype {str(index.dtype).replace('torch.', '')}"
        )
    if index.device != x.device:
        raise ValueError(f"index is on {index.device} but x is on {x.device}")


def gather_rows(x: Tensor, index: Tensor) -> Tensor:
    r"""``x.index_select(0, index)``: the rows of ``x`` named by ``index``, in its order.

    .. math::
        \mathrm{out}_k = x_{\mathrm{index}_k}, \qquad
        \frac{\partial L}{\partial x_r} = \sum_{k:\ \mathrm{index}_k = r}
        \frac{\partial L}{\partial \mathrm{out}_k}

    The gradient sums a row's terms in increasing k from zero, as ``index_select``'s
    backward (``index_add_``) does on the CPU, so both results are bitwise those of
    ``index_select``, for any thread count. Differentiable twice.

    Args:
        x: ``[N, ...]`` float32 / float64 on the CPU (other dtypes and GPU tensors run
            ``index_select``).
        index: ``[K]`` int32 or int64 row ids in ``[0, N)``; repeats allowed. Negative ids
            do not wrap: like ``index_select``, any id outside ``[0, N)`` raises IndexError.

    Returns:
        ``[K, ...]``.

    Example:
        >>> gather_rows(torch.tensor([[1.0], [2.0], [3.0]]), torch.tensor([2, 0, 2]))
        tensor([[3.],
                [1.],
                [3.]])
    """
    _check_inputs(x, index)
    if x.device.type != "cpu" or x.dtype not in CPU_DTYPES or transforms_active():
        return x.index_select(0, index)  # the same rows and gradient; torch.func transforms it
    x, index = x.contiguous(), index.contiguous()
    if tracing():
        return _gather_op(x, index)
    if x.requires_grad and torch.is_grad_enabled():
        return _GatherEager.apply(x, index)
    return _gather_rows(x, index)
