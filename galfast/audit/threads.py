"""The thread count the post-hoc attackers train with."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from threadpoolctl import threadpool_limits

__all__ = ["attacker_threads", "load_modules"]


@contextmanager
def attacker_threads(threads: int, load_first: Sequence[str] = ()) -> Iterator[None]:
    """Runs the block with ``threads`` intra-op threads in torch and in the native pools
    scikit-learn uses (OpenMP, BLAS), restoring torch's count after. The attackers are small:
    extra threads only add synchronisation, which on a loaded machine costs 10-30x.

    ``load_first``: modules to import before the pools are limited. scikit-learn brings its
    own OpenMP and BLAS libraries, and a pool loaded inside the block keeps its default
    thread count (with two attacker workers, four spinning threads on two cores)."""
    load_modules(load_first)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            yield
    finally:
        torch.set_num_threads(before)


def load_modules(modules: Sequence[str]) -> bool:
    """Imports the modules not loaded yet; whether there were any (whose native pools, if they
    bring any, a caller inside ``attacker_threads`` must then limit)."""
    missing = [name for name in modules if name not in sys.modules]
    for name in missing:
        importlib.import_module(name)
    return bool(missing)
