"""Mapping between torch dtypes and the kernels' dtype codes (csrc/common/dtype.h)."""

from __future__ import annotations

import torch

DTYPE_CODES = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3}
CPU_DTYPES = (torch.float32, torch.float64)
CUDA_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def dtype_code(dtype: torch.dtype) -> int:
    return DTYPE_CODES[dtype]


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
