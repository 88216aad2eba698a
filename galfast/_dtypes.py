"""Mapping between torch dtypes and the kernels' element types (_C.DType, csrc/common/dtype.h)."""

from __future__ import annotations

import torch

from galfast._native import _C

KERNEL_DTYPES = {
    torch.float32: _C.DType.FLOAT32,
    torch.float64: _C.DType.FLOAT64,
    torch.float16: _C.DType.FLOAT16,
    torch.bfloat16: _C.DType.BFLOAT16,
}
CPU_DTYPES = (torch.float32, torch.float64)
CUDA_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def kernel_dtype(dtype: torch.dtype) -> _C.DType:
    return KERNEL_DTYPES[dtype]


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """Low-precision inputs accumulate in float32; float64 stays float64."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def check_float_dtype(name: str, tensor: torch.Tensor) -> None:
    """Raises a ValueError naming `name` when its dtype is not supported on its device."""
    allowed = CUDA_DTYPES if tensor.device.type == "cuda" else CPU_DTYPES
    if tensor.dtype not in allowed:
        names = ", ".join(str(d).replace("torch.", "") for d in allowed)
        raise ValueError(
            f"{name} has dtype {str(tensor.dtype).replace('torch.', '')}; on "
            f"{tensor.device.type} galfast supports {names}"
        )
