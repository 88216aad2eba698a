"""What every op's launcher shares: raw pointers for the kernels' parameter structs, the one
CPU-or-CUDA dispatch, and the registration of a launcher as a torch.library custom op.

A launcher (``launch_<kernel>``) allocates its outputs, fills the kernel's ``_C.<Kernel>Params``
with pointers and sizes, and calls :func:`run_kernel`. It is a plain function, called directly
on the eager path, and the body of the custom op ``galfast::<kernel>`` (see
:func:`kernel_op`), traced by torch.compile. Neither has autograd; each op module composes them.
"""

from __future__ import annotations

import inspect
from typing import Callable, Optional

import torch
from torch import Tensor

from galfast._native import _C
from galfast.ops._functorch import register_loop_vmap

__all__ = ["kernel_op", "ptr", "run_kernel", "sync_cpu_threads"]


def ptr(t: Optional[Tensor]) -> int:
    """The data pointer of `t` as an int for a params struct; 0 (null) for None."""
    return 0 if t is None else t.data_ptr()


def sync_cpu_threads() -> None:
    """Makes galfast's OpenMP kernels use torch.get_num_threads() threads (call before a CPU
    kernel: torch may run its own OpenMP runtime, which ours does not see)."""
    n = torch.get_num_threads()
    if _C.get_num_threads() != n:
        _C.set_num_threads(n)


def run_kernel(kernel: str, params, device: torch.device) -> None:
    """Runs ``_C.<kernel>_cuda(params, stream)`` on the device's current stream when `device` is
    a GPU, else ``_C.<kernel>_cpu(params)`` with torch's CPU thread count."""
    # Compared with a device, not by its .type (a fifth of a microsecond: a new string each time).
    if device == _CPU:
        sync_cpu_threads()
        _entry(kernel, "cpu")(params)
    elif device.type == "cuda":
        if device.index is not None and device.index != torch.cuda.current_device():
            # A launch goes to the current device: tensors on cuda:1 while cuda:0 is current
            # would be read from cuda:0's stream (an illegal address, or a race with peer access).
            with torch.cuda.device(device.index):
                _entry(kernel, "cuda")(params, _current_raw_stream(device))
        else:
            _entry(kernel, "cuda")(params, _current_raw_stream(device))
    else:
        raise ValueError(f"galfast's kernels run on CPU and CUDA tensors, not on {device.type}")


_CPU = torch.device("cpu")


def _entry(kernel: str, device_type: str) -> Callable:
    """``_C.<kernel>_<device_type>``, looked up once (the name built on every call was a few
    percent of a small graph's aggregation)."""
    entry = _ENTRIES.get((kernel, device_type))
    if entry is None:
        if device_type == "cuda" and not hasattr(_C, f"{kernel}_cuda"):
            raise RuntimeError(
                "this galfast build has no CUDA kernels (built without nvcc or with "
                "GALFAST_CUDA=0); reinstall on a machine with the CUDA toolkit"
            )
        entry = _ENTRIES[kernel, device_type] = getattr(_C, f"{kernel}_{device_type}")
    return entry


_ENTRIES: dict[tuple[str, str], Callable] = {}


# The current stream's handle without building a torch.cuda.Stream object (a few microseconds a
# call); torch's own generated code uses the same entry point. Absent from CPU-only builds.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _current_raw_stream(device: torch.device) -> int:
    if _raw_stream is not None and device.index is not None:
        return _raw_stream(device.index)
    return torch.cuda.current_stream(device).cuda_stream


def kernel_op(
    name: str, body: Callable, outputs: Callable, mutates_args: tuple[str, ...] = ()
) -> torch.library.CustomOpDef:
    """Registers `body` as the custom op ``galfast::<name>`` (its schema read from the body's
    signature, so the argument list is written once) with a fake kernel returning
    ``outputs(...)``. `outputs` is the op's shape function: it allocates the op's outputs from
    the body's arguments of the same names, and the body allocates its outputs with it too, so
    the real and the traced shapes cannot drift apart. `mutates_args` names the arguments the
    body writes into (such an op has no autograd). An op that writes nothing gets a vmap rule
    (one call per sample: the backward of a vmapped op runs kernel ops)."""
    op = torch.library.custom_op(f"galfast::{name}", mutates_args=mutates_args)(body)
    signature = inspect.signature(body)
    wanted = list(inspect.signature(outputs).parameters)

    def fake(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return outputs(*(bound.arguments[arg] for arg in wanted))

    op.register_fake(fake)
    if not mutates_args:
        register_loop_vmap(op)
    return op
