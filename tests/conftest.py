"""Shared pytest setup: CUDA tests skip cleanly without a GPU; an opt-in one-thread fixture;
small WN18RR / FB15k-237 folders with pinned checksums."""

from __future__ import annotations

import pytest
import torch
from kg_fixtures import pin_folder, write_fb15k_237, write_wn18rr


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


@pytest.fixture
def wn_folder(tmp_path, monkeypatch):
    """A small WN18RR folder (tests/kg_fixtures.py), its files' checksums pinned."""
    folder = write_wn18rr(tmp_path / "wn18rr")
    pin_folder(monkeypatch, "wn18rr", folder)
    return folder


@pytest.fixture
def fb_folder(tmp_path, monkeypatch):
    """A small FB15k-237 folder with entity types, its files' checksums pinned."""
    folder = write_fb15k_237(tmp_path / "fb15k-237")
    pin_folder(monkeypatch, "fb15k-237", folder)
    return folder


@pytest.fixture
def audit_files(tmp_path):
    """The files of a small `galfast audit`: embeddings z.pt, labels.pt and a ring graph g.pt."""
    torch.save(torch.randn(20, 3), tmp_path / "z.pt")
    torch.save(torch.arange(20) % 2, tmp_path / "labels.pt")
    torch.save(torch.stack([torch.arange(20), (torch.arange(20) + 1) % 20]), tmp_path / "g.pt")
    return tmp_path
