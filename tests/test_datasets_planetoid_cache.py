"""Planetoid files already in galfast's download cache are checked against their SHA-256 on
every load: one cut short or edited there is named, with what to do, instead of failing as an
unpickling error or loading as other data. A user's own root folder is read as it is."""

from __future__ import annotations

import shutil

import pytest
import torch
from test_datasets_planetoid import _offline, _pin_fixture_hashes, _serve, write_planetoid

from galfast.datasets import planetoid
from galfast.datasets.download import ChecksumError


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache holding CiteSeer-named fixture files, downloaded and verified once."""
    upstream = tmp_path / "upstream"
    write_planetoid(upstream)
    _pin_fixture_hashes(monkeypatch, upstream, "citeseer")
    monkeypatch.setenv("GALFAST_DATA", str(tmp_path / "cache"))
    planetoid("citeseer", opener=_serve(upstream))
    return tmp_path / "cache" / "planetoid"


def _edit(path):
    """The same length, one byte changed: parses, but is not the published file."""
    data = bytearray(path.read_bytes())
    data[-2] ^= 1
    path.write_bytes(bytes(data))


def test_an_intact_cache_loads_offline(cache):
    assert planetoid("citeseer", opener=_offline).num_nodes > 0


@pytest.mark.parametrize("part", ["graph", "allx", "test.index"])
def test_a_truncated_cached_file_is_named(cache, part):
    path = cache / f"ind.citeseer.{part}"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(ChecksumError, match="delete it and galfast downloads it again") as info:
        planetoid("citeseer", opener=_offline)
    assert str(path) in str(info.value) and "damaged or edited" in str(info.value)


def test_an_edited_cached_file_is_named_without_downloads(cache):
    path = cache / "ind.citeseer.ty"
    _edit(path)
    with pytest.raises(ChecksumError, match="download=True to fetch it again") as info:
        planetoid("citeseer", download=False)
    assert str(path) in str(info.value)


def test_an_incomplete_cache_checks_the_files_it_has(cache):
    # allx absent: the loader fetches what is missing, and must still check the rest.
    (cache / "ind.citeseer.allx").unlink()
    _edit(cache / "ind.citeseer.ally")
    with pytest.raises(ChecksumError, match="ind.citeseer.ally"):
        planetoid("citeseer", download=False)


def test_a_root_folder_is_read_as_it_is(cache, tmp_path):
    # Another release, say: the user's own copy is not held to the published hashes.
    root = tmp_path / "mine"
    shutil.copytree(cache, root)
    index = root / "ind.citeseer.test.index"
    index.write_text(index.read_text() + "\n\n")  # other bytes, the same ids
    mine = planetoid("citeseer", root=root)
    assert torch.equal(mine.x, planetoid("citeseer", opener=_offline).x)
