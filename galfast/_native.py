"""Loads the compiled extension with a clear message when it is missing or mismatched."""

from __future__ import annotations

try:
    from galfast import _C
except ImportError as err:  # pragma: no cover - exercised only on broken installs
    raise ImportError(
        "galfast's native extension (galfast._C) is missing or failed to load. Install galfast "
        "with `pip install .` from a source checkout (it builds the C++/CUDA kernels), not by "
        f"putting the source folder on sys.path. Original error: {err}"
    ) from err

__all__ = ["_C"]
