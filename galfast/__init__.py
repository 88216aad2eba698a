"""galfast: fast GNN kernels and GAL adversarial training that hides sensitive node attributes."""

from __future__ import annotations

from galfast import (
    # First (sorted first, too), before torch loads: Ctrl-C while the galfast command imports
    # prints one line.
    _startup,  # noqa: F401
    datasets,
    models,
    nn,
    ops,
)
from galfast._native import _C
from galfast.audit import AuditReport, audit
from galfast.graph import Graph
from galfast.heap import keep_large_blocks_out_of_the_heap
from galfast.train import GALTrainer, SensitiveAttribute

__version__ = _C.build_info()["version"]

__all__ = [
    "AuditReport",
    "GALTrainer",
    "Graph",
    "SensitiveAttribute",
    "audit",
    "build_info",
    "datasets",
    "keep_large_blocks_out_of_the_heap",
    "models",
    "nn",
    "ops",
    "__version__",
]


def build_info() -> dict:
    """What the native extension was built with: ``version``, ``cuda`` (compiled in),
    ``cuda_archs``, ``openmp``, ``compiler`` (and ``cuda_runtime`` when CUDA is in)."""
    return dict(_C.build_info())
