"""Mapping between torch dtypes and the kernels' element types (_C.DType, csrc/common/dtype.h),
and the checks of dtypes the ops and models share."""

from __future__ import annotations

import math
import operator
from typing import Optional

import torch
from torch.utils.weak import WeakIdKeyDictionary

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


def check_readable_tensor(name: str, t: torch.Tensor, *, sparse: bool = False) -> None:
    """Refuses (ValueError naming ``name``) a tensor whose values the checks and models after
    it cannot read, which torch would report from deep inside: a nested tensor, one on the meta
    device (no values), a sparse one (unless ``sparse``: the caller densifies it) and a
    floating-point dtype other than float16, bfloat16, float32 and float64 (float8)."""
    if t.is_nested:
        raise ValueError(f"{name} must be a regular tensor, got a nested tensor")
    if t.device.type == "meta":
        raise ValueError(f"{name} is on the meta device, which holds no values")
    if not sparse and t.layout != torch.strided:
        raise ValueError(f"{name} must be a dense tensor, got layout {t.layout} (.to_dense())")
    if t.is_floating_point() and t.dtype not in CUDA_DTYPES:
        raise ValueError(
            f"{name} must be float16, bfloat16, float32 or float64, got {t.dtype} (.float())"
        )


def check_float_dtype(name: str, tensor: torch.Tensor) -> None:
    """Raises a ValueError naming `name` when its dtype is not supported on its device."""
    allowed = CUDA_DTYPES if tensor.is_cuda else CPU_DTYPES
    if tensor.dtype not in allowed:
        names = ", ".join(str(d).replace("torch.", "") for d in allowed)
        raise ValueError(
            f"{name} has dtype {str(tensor.dtype).replace('torch.', '')}; on "
            f"{tensor.device.type} galfast supports {names}"
        )


def as_int(value: object) -> Optional[int]:
    """``value`` as an int when it is an integer of any type (Python's, NumPy's, a 0-d integer
    tensor's) other than a bool; else None (floats such as 3.0 too)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, torch.Tensor) and (
        value.dim() != 0 or value.dtype == torch.bool or not holds_integers(value)
    ):
        return None  # a [1] tensor or a bool one would pass operator.index
    try:
        return operator.index(value)
    except TypeError:
        return None


def holds_integers(t: torch.Tensor) -> bool:
    """Whether ``t`` has an integer dtype: ids and class labels (bool, float and complex do
    not count; torch would read a bool mask as ids 0 and 1, or truncate floats)."""
    return not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)


def all_finite(t: torch.Tensor) -> bool:
    """``bool(torch.isfinite(t).all())`` for a floating tensor, in one pass with no temporary.

    A NaN or an infinity anywhere makes the sum NaN or infinite, so a finite sum proves every
    value finite; only a sum that is not finite (a non-finite value, or finite values whose sum
    overflows) takes the exact elementwise test. ``isfinite(t).all()`` writes a bool tensor and
    reduces it: 57 us against 5 us for 10k floats, 8.3 ms against 0.35 ms for 1.8M (one thread),
    which every call with user-passed edge weights used to pay (issue 19)."""
    return math.isfinite(float(t.detach().sum())) or bool(torch.isfinite(t).all())


# Tensors found finite, with their version counter at the time (entries leave with the tensor).
_FOUND_FINITE = WeakIdKeyDictionary()


def finite_since_scanned(t: torch.Tensor) -> bool:
    """:func:`all_finite`, remembered: a tensor found finite is not read again until an
    in-place change moves its version counter. The scan reads the values on the host, which on
    a GPU is a synchronisation: about 35 us a call for the same edge weights passed on every
    call (issue 19). As with a Graph's own tensors, an edit through ``.data`` is not seen."""
    if t.is_inference():  # no version counter to remember it by
        return all_finite(t)
    if _FOUND_FINITE.get(t) == t._version:
        return True
    if not all_finite(t):
        return False
    _FOUND_FINITE[t] = t._version
    return True


# Tensors found to fit a narrower dtype: tensor -> (version, dtype) of the last check.
_FOUND_FITTING = WeakIdKeyDictionary()


def largest_magnitude(t: torch.Tensor) -> float:
    """``max |t|`` of a non-empty tensor, read on the host."""
    return float(t.detach().abs().max())


def fits_dtype(t: torch.Tensor, dtype: torch.dtype) -> bool:
    """Whether the finite floating tensor `t` converts to `dtype` without overflowing to an
    infinity (always where `dtype` reaches as far as t's); remembered as
    :func:`finite_since_scanned` is, as the same weights come back every call."""
    if torch.finfo(dtype).max >= torch.finfo(t.dtype).max:
        return True
    remembered = not t.is_inference()  # an inference tensor has no version counter
    if remembered and _FOUND_FITTING.get(t) == (t._version, dtype):
        return True
    if t.numel() and largest_magnitude(t) > torch.finfo(dtype).max:
        return False
    if remembered:
        _FOUND_FITTING[t] = (t._version, dtype)
    return True
