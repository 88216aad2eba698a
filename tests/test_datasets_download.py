"""Verified downloads into the cache: checksums, pinning, atomicity, safe extraction."""

from __future__ import annotations

import hashlib
import io
import urllib.error
import zipfile

import pytest

from galfast.datasets.download import (
    ChecksumError,
    Resource,
    UnpinnedChecksumWarning,
    data_dir,
    extract_zip,
    fetch,
    verify_file,
)

PAYLOAD = b"planetoid bytes \x00\xff" * 1000


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "upstream" / "file.bin"
    path.parent.mkdir()
    path.write_bytes(PAYLOAD)
    return path


def leftovers(directory):
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def test_data_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("GALFAST_DATA", str(tmp_path / "data"))
    assert data_dir() == tmp_path / "data"
    monkeypatch.delenv("GALFAST_DATA")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert data_dir() == tmp_path / ".cache" / "galfast"


def test_fetch_file_url_verifies_and_writes(source, tmp_path):
    cache = tmp_path / "cache"
    resource = Resource(source.as_uri(), "file.bin", sha256(PAYLOAD))
    path = fetch(resource, cache, progress=False)
    assert path == cache / "file.bin"
    assert path.read_bytes() == PAYLOAD
    assert leftovers(cache) == ["file.bin"]


def test_fetch_checksum_mismatch_saves_nothing(source, tmp_path):
    cache = tmp_path / "cache"
    resource = Resource(source.as_uri(), "file.bin", "0" * 64)
    with pytest.raises(ChecksumError, match="SHA-256 mismatch for file.bin.*expected 0000"):
        fetch(resource, cache, progress=False)
    assert leftovers(cache) == []


def test_fetch_unknown_checksum_is_pinned_then_enforced(source, tmp_path):
    cache = tmp_path / "cache"
    resource = Resource(source.as_uri(), "file.bin")
    with pytest.warns(UnpinnedChecksumWarning, match=sha256(PAYLOAD)):
        fetch(resource, cache, progress=False)
    pin = cache / "file.bin.sha256"
    assert pin.read_text().split()[0] == sha256(PAYLOAD)

    # The next download (file gone, upstream changed) must match the pinned hash.
    (cache / "file.bin").unlink()
    source.write_bytes(b"tampered")
    with pytest.raises(ChecksumError, match=sha256(PAYLOAD)):
        fetch(resource, cache, progress=False)
    assert leftovers(cache) == ["file.bin.sha256"]


def test_fetch_reuses_cached_file_without_network(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "file.bin").write_bytes(PAYLOAD)

    def offline(url, timeout):
        raise AssertionError("must not download a cached file")

    resource = Resource("https://example.invalid/file.bin", "file.bin", sha256(PAYLOAD))
    assert fetch(resource, cache, opener=offline).read_bytes() == PAYLOAD


class _Response(io.BytesIO):
    """A urlopen-like response whose connection drops after `fail_after` bytes (never when
    `fail_after` is None)."""

    def __init__(self, data: bytes, fail_after=None):
        super().__init__(data)
        self.headers = {"Content-Length": str(len(data))}
        self.fail_after = fail_after

    def read(self, size=-1):
        if self.fail_after is None:
            return super().read(size)
        if self.tell() >= self.fail_after:
            raise urllib.error.URLError("connection reset")
        return super().read(min(size, self.fail_after - self.tell()))


def test_interrupted_download_leaves_no_partial_file(tmp_path):
    cache = tmp_path / "cache"
    resource = Resource("https://example.invalid/file.bin", "file.bin", sha256(PAYLOAD))
    with pytest.raises(urllib.error.URLError):
        fetch(resource, cache, opener=lambda url, timeout: _Response(PAYLOAD, 5000), progress=False)
    assert leftovers(cache) == []
    # The same opener without the failure completes the download.
    path = fetch(resource, cache, opener=lambda url, timeout: _Response(PAYLOAD), progress=False)
    assert path.read_bytes() == PAYLOAD


def test_verify_file(tmp_path):
    path = tmp_path / "file.bin"
    path.write_bytes(PAYLOAD)
    verify_file(path, Resource("https://example.invalid/f", "file.bin", sha256(PAYLOAD)))
    verify_file(path, Resource("https://example.invalid/f", "file.bin"))  # nothing to check
    with pytest.raises(ChecksumError, match="Replace it with an intact copy"):
        verify_file(path, Resource("https://example.invalid/f", "file.bin", sha256(b"other")))
    (tmp_path / "file.bin.sha256").write_text(f"{sha256(b'other')}  file.bin\n")
    with pytest.raises(ChecksumError, match=sha256(b"other")):  # a pinned hash counts too
        verify_file(path, Resource("https://example.invalid/f", "file.bin"))


def _zip(path, members):
    with zipfile.ZipFile(path, "w") as zipped:
        for name, data in members.items():
            zipped.writestr(name, data)


def test_extract_zip_unpacks_the_named_folder(tmp_path):
    archive = tmp_path / "ml-1m.zip"
    _zip(archive, {"ml-1m/ratings.dat": "1::1::5::0\n", "ml-1m/README": "x"})
    folder = extract_zip(archive, tmp_path, "ml-1m")
    assert (folder / "ratings.dat").read_text() == "1::1::5::0\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ml-1m", "ml-1m.zip"]


def test_extract_zip_rejects_path_traversal(tmp_path):
    archive = tmp_path / "evil.zip"
    _zip(archive, {"ml-1m/ok": "x", "../escape": "x"})
    with pytest.raises(ValueError, match="unsafe member path"):
        extract_zip(archive, tmp_path, "ml-1m")
    assert not (tmp_path.parent / "escape").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.zip"]


def test_extract_zip_requires_the_folder(tmp_path):
    archive = tmp_path / "flat.zip"
    _zip(archive, {"ratings.dat": "x"})
    with pytest.raises(ValueError, match="no top-level folder 'ml-1m'"):
        extract_zip(archive, tmp_path, "ml-1m")
