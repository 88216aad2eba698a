"""Each loader's ``*_files`` names every file that loader opens or puts in place, for a root and
for its cache, downloads included: the command line refuses outputs that are one of them, so a
file missing from the list could be overwritten with results and read back as data."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sys
import warnings
import zipfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from kg_fixtures import (
    pin_folder,
    serve,
    wn18rr_download,
    write_fb15k_237,
    write_wn18rr,
)
from qm9_fixture import write_canonical
from test_datasets_movielens import write_ml1m, write_ml100k
from test_datasets_planetoid import write_planetoid

from galfast.datasets import (
    UnpinnedChecksumWarning,
    fb15k_237,
    movielens,
    movielens_loader,
    planetoid,
    qm9,
    wn18rr,
)
from galfast.datasets import qm9_loader as qm9_module
from galfast.datasets.download import Resource
from galfast.datasets.knowledge_graph import knowledge_graph_files
from galfast.datasets.movielens_loader import movielens_files
from galfast.datasets.planetoid_loader import planetoid_files
from galfast.datasets.qm9_loader import qm9_files
from galfast.datasets.qm9_qm9pack import QM9PACK_FILES

_touched: list | None = None  # paths opened or renamed into place while recording


def _audit(event: str, args: tuple) -> None:
    if _touched is None:
        return
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        _touched.append(args[0])
    elif event == "os.rename":  # os.replace too: the file a download or a cache lands in
        _touched.append(args[1])


sys.addaudithook(_audit)  # a hook stays for the process: it does nothing unless recording


@contextmanager
def recording():
    """Collects the files under the test's folders that the block opened or renamed into
    place (temporary files gone by its end are left out)."""
    global _touched
    _touched = touched = []
    try:
        yield touched
    finally:
        _touched = None


def assert_listed(touched: list, listed: tuple[Path, ...], under: Path) -> None:
    files = {Path(os.path.realpath(os.fsdecode(path))) for path in touched}
    files = {path for path in files if path.is_file() and path.is_relative_to(under.resolve())}
    assert files, "the load read nothing under the test's folder"
    assert files <= {Path(os.path.realpath(path)) for path in listed}


@pytest.fixture(autouse=True)
def no_qm9pack(monkeypatch):
    monkeypatch.setattr(qm9_module, "qm9pack_folder", lambda: None)


@pytest.mark.parametrize("inside", [True, False], ids=["ml-1m folder", "root itself"])
def test_movielens_files_name_what_it_reads_from_a_root(tmp_path, inside):
    write_ml1m(tmp_path / "ml-1m" if inside else tmp_path)
    write_ml100k(tmp_path / "ml-100k")
    for version in ("1m", "100k"):
        with recording() as touched:
            movielens(version, tmp_path)
        assert_listed(touched, movielens_files(version, tmp_path), tmp_path)


def test_movielens_files_name_the_download_and_what_it_unpacks(tmp_path, monkeypatch):
    write_ml1m(tmp_path / "staging" / "ml-1m")
    archive = tmp_path / "ml-1m.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in sorted((tmp_path / "staging" / "ml-1m").iterdir()):
            zipped.write(path, f"ml-1m/{path.name}")
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    spec = movielens_loader._VERSIONS["1m"]
    local = Resource(archive.as_uri(), "ml-1m.zip", digest)
    monkeypatch.setitem(movielens_loader._VERSIONS, "1m", dataclasses.replace(spec, archive=local))
    cache = tmp_path / "cache"
    monkeypatch.setenv("GALFAST_DATA", str(cache))
    with recording() as touched:
        movielens("1m")
    assert_listed(touched, movielens_files("1m"), cache)
    assert cache / "ml-1m.zip" in movielens_files("1m")


def test_knowledge_graph_files_name_the_triples_and_the_attributes(tmp_path, monkeypatch):
    pin_folder(monkeypatch, "wn18rr", write_wn18rr(tmp_path / "wn18rr"))
    # The CompGCN layout inside the dataset folder, the attribute file beside the triples.
    fb = write_fb15k_237(tmp_path / "fb15k-237" / "FB15k-237")
    pin_folder(monkeypatch, "fb15k-237", fb)
    for name, load, options in (("wn18rr", wn18rr, {}), ("fb15k-237", fb15k_237, {"top_types": 3})):
        with recording() as touched:
            load(tmp_path, **options)
        listed = knowledge_graph_files(name, tmp_path)
        assert_listed(touched, listed, tmp_path)
        assert len(listed) == 4  # the three splits and the attribute file
    assert fb / "entity_types" / "Entity_Type_train.txt" in listed


def test_knowledge_graph_files_name_the_download_and_where_attributes_go(tmp_path, monkeypatch):
    cache, opener = wn18rr_download(tmp_path, monkeypatch)
    with recording() as touched:
        wn18rr(attributes=False, opener=opener)
    listed = knowledge_graph_files("wn18rr")
    assert_listed(touched, listed, cache)
    # Absent, but one put there is read as the attributes by the next load.
    assert cache / "wn18rr" / "entity_pos_sense.tsv" in listed


@pytest.mark.parametrize("raw", ["", "raw"])
def test_qm9_files_name_the_raw_files_and_the_cache_it_writes(tmp_path, raw):
    write_canonical(tmp_path / raw)
    with recording() as touched:
        qm9(tmp_path, source="canonical", download=False)
    listed = qm9_files(tmp_path)
    assert_listed(touched, listed, tmp_path)
    assert tmp_path / "qm9_canonical_v1.npz" in listed
    with recording() as touched:  # the second load reads the cache
        qm9(tmp_path, source="canonical", download=False)
    assert_listed(touched, listed, tmp_path)


def test_qm9_files_name_the_download_and_its_pinned_hashes(tmp_path, monkeypatch):
    release = write_canonical(tmp_path / "release")
    archive = tmp_path / "qm9.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for name in ("gdb9.sdf", "gdb9.sdf.csv"):
            zipped.write(release / name, name)
    opener = serve({"qm9.zip": archive, "3195404": release / "uncharacterized.txt"})
    cache = tmp_path / "cache"
    monkeypatch.setenv("GALFAST_DATA", str(cache))
    with recording() as touched, warnings.catch_warnings():
        warnings.simplefilter("ignore", UnpinnedChecksumWarning)
        qm9(source="canonical", opener=opener)
    listed = qm9_files()
    assert_listed(touched, listed, cache)
    assert cache / "qm9" / "raw" / "qm9.zip.sha256" in listed


def test_qm9_files_name_the_installed_qm9pack_csvs(tmp_path, monkeypatch):
    monkeypatch.setattr(qm9_module, "qm9pack_folder", lambda: tmp_path / "qm9pack")
    listed = qm9_files(tmp_path / "root")
    assert {tmp_path / "qm9pack" / name for name in QM9PACK_FILES} <= set(listed)


def test_planetoid_files_name_what_it_reads(tmp_path):
    write_planetoid(tmp_path, name="cora")
    with recording() as touched:
        planetoid("cora", tmp_path)
    assert_listed(touched, planetoid_files("cora", tmp_path), tmp_path)


def test_a_root_without_the_files_is_refused_as_the_loader_refuses_it(tmp_path):
    for listing in (
        lambda: movielens_files("1m", tmp_path),
        lambda: knowledge_graph_files("wn18rr", tmp_path),
    ):
        with pytest.raises(FileNotFoundError, match=str(tmp_path)):
            listing()
    with pytest.raises(ValueError, match="unknown knowledge graph"):
        knowledge_graph_files("fb15k", tmp_path)
    with pytest.raises(ValueError, match="unknown MovieLens version"):
        movielens_files("20m", tmp_path)
