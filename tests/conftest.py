"""Shared pytest setup: CUDA tests skip cleanly without a GPU; an opt-in one-thread fixture."""

from __future__ import annotations

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def one_torch_thread():
    """Runs a test with one torch thread (modules opt in with ``usefixtures``)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(params=[True, False], ids=["simd", "no-simd"])
def aggregate_simd(request):
    """Runs a test with the AVX-512 CPU sum allowed, then with the AVX2 one only (both runs take
    the AVX2 kernel on a CPU without AVX-512)."""
    from galfast._native import _C

    before = _C.set_aggregate_simd(request.param)
    yield request.param
    _C.set_aggregate_simd(before)
