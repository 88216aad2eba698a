"""Thin wrappers over the raw kernels: allocate outputs, pass pointers, pick the backend by
device. Each is a plain function (``launch_*``, called directly in eager backward passes) and
a torch.library op of the same body (traced by torch.compile). They have no autograd of their
own; galfast.ops.aggregate composes them into a differentiable op."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from galfast._dtypes import dtype_code
from galfast._native import _C

MODE_SUM, MODE_MAX, MODE_MASKED_SUM = 0, 1, 2


def _ptr(t: Optional[Tensor]) -> int:
    return 0 if t is None else t.data_ptr()


def _stream(device: torch.device) -> int:
    return torch.cuda.current_stream(device).cuda_stream


def sync_cpu_threads() -> None:
    """Makes galfast's OpenMP kernels use torch.get_num_threads() threads (call before a CPU
    kernel: torch may run its own OpenMP runtime, which ours does not see)."""
    n = torch.get_num_threads()
    if _C.get_num_threads() != n:
        _C.set_num_threads(n)


def _require_cuda_build() -> None:
    if not hasattr(_C, "aggregate_cuda"):
        raise RuntimeError(
            "this galfast build has no CUDA kernels (built without nvcc or with GALFAST_CUDA=0); "
            "reinstall on a machine with the CUDA toolkit"
        )


def launch_spmm_csr(
    rowptr: Tensor,
    col: Tensor,
    edge_id: Optional[Tensor],
    weight: Optional[Tensor],
    row_scale: Optional[Tensor],
    col_scale: Optional[Tensor],
    hub_rows: Tensor,
    x: Tensor,
    mask_arg: Optional[Tensor],
    mode: int,
) -> tuple[Tensor, Tensor]:
    """out[r] = reduce_e w_e * x[col[e]] over CSR row r; returns (out, arg) where arg holds the
    winning edge id for max and is empty otherwise."""
    num_rows = rowptr.numel() - 1
    out = x.new_empty(num_rows, x.size(1))
    arg = torch.empty(
        (num_rows, x.size(1)) if mode == MODE_MAX else (0,), dtype=torch.long, device=x.device
    )
    p = _C.AggregateParams()
    p.rowptr, p.col, p.edge_id = _ptr(rowptr), _ptr(col), _ptr(edge_id)
    p.weight, p.row_scale, p.col_scale = _ptr(weight), _ptr(row_scale), _ptr(col_scale)
    p.x, p.out, p.arg, p.mask_arg = _ptr(x), _ptr(out), _ptr(arg), _ptr(mask_arg)
    p.num_rows, p.num_cols, p.num_features = num_rows, x.size(0), x.size(1)
    p.mode = _C.AggMode(mode)
    p.dtype = dtype_code(x.dtype)
    if x.device.type == "cuda":
        _require_cuda_build()
        p.hub_rows, p.num_hub_rows = _ptr(hub_rows), hub_rows.numel()
        _C.aggregate_cuda(p, _stream(x.device))
    else:
        sync_cpu_threads()
        _C.aggregate_cpu(p)
    return out, arg


spmm_csr = torch.library.custom_op("galfast::spmm_csr", mutates_args=())(launch_spmm_csr)


@spmm_csr.register_fake
def _(rowptr, col, edge_id, weight, row_scale, col_scale, hub_rows, x, mask_arg, mode):
    num_rows = rowptr.size(0) - 1
    arg_shape = (num_rows, x.size(1)) if mode == MODE_MAX else (0,)
    return x.new_empty(num_rows, x.size(1)), x.new_empty(arg_shape, dtype=torch.long)


def launch_sddmm_csr(
    rowptr: Tensor,
    row: Tensor,
    col: Tensor,
    row_scale: Optional[Tensor],
    col_scale: Optional[Tensor],
    grad_out: Tensor,
    x: Tensor,
    arg: Optional[Tensor],
) -> Tensor:
    """grad_w[e] = row_scale[r] col_scale[c] <grad_out[r], x[c]> per CSR edge e = (c -> r),
    counting only the features whose max arg is e when `arg` is given."""
    grad_w = x.new_empty(col.numel())
    p = _C.EdgeGradParams()
    p.rowptr, p.row, p.col = _ptr(rowptr), _ptr(row), _ptr(col)
    p.row_scale, p.col_scale = _ptr(row_scale), _ptr(col_scale)
    p.grad_out, p.x, p.arg, p.grad_weight = _ptr(grad_out), _ptr(x), _ptr(arg), _ptr(grad_w)
    p.num_edges, p.num_rows, p.num_cols = col.numel(), rowptr.numel() - 1, x.size(0)
    p.num_features = x.size(1)
    p.dtype = dtype_code(x.dtype)
    if x.device.type == "cuda":
        _require_cuda_build()
        _C.edge_grad_cuda(p, _stream(x.device))
    else:
        sync_cpu_threads()
        _C.edge_grad_cpu(p)
    return grad_w


sddmm_csr = torch.library.custom_op("galfast::sddmm_csr", mutates_args=())(launch_sddmm_csr)


@sddmm_csr.register_fake
def _(rowptr, row, col, row_scale, col_scale, grad_out, x, arg):
    return x.new_empty(col.size(0))
