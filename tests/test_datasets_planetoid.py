"""Planetoid: the raw-file parser on generated fixtures in the original pickle format, the
loader's sources (root, cache, bundled Cora, download), and the real copies when present."""

from __future__ import annotations

import collections
import hashlib
import io
import os
import pickle
import urllib.error
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from galfast.datasets import (
    DatasetNotFoundError,
    MissingFeaturesWarning,
    planetoid,
    planetoid_loader,
)
from galfast.datasets.bundled import BUNDLED_DIR, load_bundled
from galfast.datasets.planetoid_raw import read_planetoid_raw

NUM_ALL, NUM_TRAIN, NUM_FEATURES, NUM_CLASSES = 520, 12, 16, 3
TEST_RANGE = range(NUM_ALL, NUM_ALL + 40)
NO_ROW = {NUM_ALL + 5, NUM_ALL + 17, NUM_ALL + 30}  # CiteSeer-like ids without a test row
NUM_NODES = TEST_RANGE.stop


def _shared_planetoid():
    repo = Path(__file__).resolve().parents[1]
    candidates = [repo.parent / "shared" / "data", Path("/work/shared/data")]
    return next((p / "planetoid" for p in candidates if (p / "planetoid").is_dir()), None)


SHARED = _shared_planetoid()
needs_shared = pytest.mark.skipif(SHARED is None, reason="no shared Planetoid copy here")


def _dump(path, obj):
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)  # the raw files are Python 2 (protocol 2) pickles


def _one_hot(labels):
    out = np.zeros((len(labels), NUM_CLASSES), dtype=np.int32)
    out[np.arange(len(labels)), labels] = 1
    return out


def write_planetoid(folder, name="citeseer", seed=0, parts=None):
    """Writes ind.<name>.* like kimiyoung/planetoid and returns the truth they encode."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    features = (rng.random((NUM_NODES, NUM_FEATURES)) < 0.3).astype(np.float32)
    labels = rng.integers(0, NUM_CLASSES, NUM_NODES)
    test_index = np.array([i for i in TEST_RANGE if i not in NO_ROW])
    rng.shuffle(test_index)  # file order is not node order
    for node in NO_ROW:
        features[node] = 0
        labels[node] = -1

    adjacency = collections.defaultdict(list)
    edges = rng.integers(0, NUM_NODES, size=(2, 900))
    for u, v in edges.T:
        adjacency[int(u)].append(int(v))
    adjacency[3].append(3)  # a self loop
    adjacency[1] += [2, 2]  # a duplicate, and its reverse below
    adjacency[2].append(1)

    objects = {
        "x": sp.csr_matrix(features[:NUM_TRAIN]),
        "y": _one_hot(labels[:NUM_TRAIN]),
        "allx": sp.csr_matrix(features[:NUM_ALL]),
        "ally": _one_hot(labels[:NUM_ALL]),
        "tx": sp.csr_matrix(features[test_index]),
        "ty": _one_hot(labels[test_index]),
        "graph": adjacency,
    }
    for part, obj in objects.items():
        if parts is None or part in parts:
            _dump(folder / f"ind.{name}.{part}", obj)
    if parts is None or "test.index" in parts:
        (folder / f"ind.{name}.test.index").write_text("".join(f"{i}\n" for i in test_index))

    pairs = {(min(u, v), max(u, v)) for u, vs in adjacency.items() for v in vs if u != v}
    return dict(features=features, labels=labels, test_index=test_index, pairs=pairs)


def _pair_set(tensor):
    return set(map(tuple, tensor.t().tolist()))


def test_parser_recovers_nodes_in_node_order(tmp_path):
    truth = write_planetoid(tmp_path)
    raw = read_planetoid_raw(tmp_path, "citeseer")
    assert raw.num_nodes == NUM_NODES and raw.num_classes == NUM_CLASSES
    np.testing.assert_array_equal(raw.features.toarray(), truth["features"])
    np.testing.assert_array_equal(raw.labels, truth["labels"])
    assert set(map(tuple, raw.pairs.T.tolist())) == truth["pairs"]
    assert np.all(raw.pairs[0] < raw.pairs[1])
    np.testing.assert_array_equal(raw.train_index, np.arange(NUM_TRAIN))
    np.testing.assert_array_equal(raw.val_index, np.arange(NUM_TRAIN, NUM_TRAIN + 500))
    np.testing.assert_array_equal(raw.test_index, truth["test_index"])


def test_dataset_fields_from_root(tmp_path):
    truth = write_planetoid(tmp_path / "planetoid")
    ds = planetoid("citeseer", root=tmp_path)  # finds the planetoid/ subfolder
    assert torch.equal(ds.x, torch.from_numpy(truth["features"]))
    assert torch.equal(ds.y, torch.from_numpy(truth["labels"]))
    assert ds.num_classes == NUM_CLASSES and ds.num_features == NUM_FEATURES
    assert ds.train_mask.nonzero().view(-1).tolist() == list(range(NUM_TRAIN))
    assert ds.val_mask.sum() == 500 and not (ds.val_mask & ds.train_mask).any()
    assert sorted(ds.test_mask.nonzero().view(-1).tolist()) == sorted(truth["test_index"])
    labelled = [i for i in range(NUM_NODES) if i not in NO_ROW]
    assert ds.attribute_nodes.tolist() == labelled
    assert torch.equal(ds.attributes["class"], ds.y[ds.attribute_nodes])
    assert len(ds.attribute_classes["class"]) == NUM_CLASSES
    assert any("3 nodes in the test id range" in note for note in ds.notes)
    assert _pair_set(ds.graph.edge_index()) == truth["pairs"] | {(v, u) for u, v in truth["pairs"]}
    assert "MIT" in ds.license


def test_missing_feature_file_gives_structure_only(tmp_path):
    parts = {"x", "y", "tx", "ty", "ally", "graph", "test.index"}  # no allx, as PubMed here
    truth = write_planetoid(tmp_path, name="pubmed", parts=parts)
    with pytest.warns(MissingFeaturesWarning, match="ind.pubmed.allx"):
        ds = planetoid("pubmed", root=tmp_path)
    assert ds.x is None and not ds.has_features and ds.num_features == 0
    assert torch.equal(ds.y, torch.from_numpy(truth["labels"]))
    assert ds.link_split.train_pos.size(1) > 0
    assert "structure-only" in ds.notes[0]


def test_missing_structure_file_names_the_files(tmp_path):
    write_planetoid(tmp_path, parts={"x", "y", "tx", "ty", "allx", "ally", "test.index"})
    with pytest.raises(DatasetNotFoundError, match=r"ind\.cora\.graph.*kimiyoung"):
        planetoid("cora", root=tmp_path)


def test_unpickler_refuses_foreign_globals(tmp_path):
    write_planetoid(tmp_path)
    evil = b"\x80\x02cos\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03."
    (tmp_path / "ind.citeseer.graph").write_bytes(evil)
    with pytest.raises(ValueError, match="refusing to load os.system"):
        read_planetoid_raw(tmp_path, "citeseer")


@pytest.mark.parametrize(
    "part, replacement, message",
    [
        ("ty", _one_hot(np.zeros(5, dtype=int)), "ty has 5 rows"),
        ("graph", {0: [NUM_NODES + 3]}, "refers to nodes outside"),
        ("ally", np.zeros(4), "2-D one-hot"),
        ("allx", np.zeros((3, 3)), "scipy sparse"),
        # A neighbour "x" was a ValueError naming no file; 1.7 was truncated to node 1.
        ("graph", {0: [1, "x"]}, r"ind.citeseer.graph must map integer node ids"),
        ("graph", {0: [1, 1.7]}, r"ind.citeseer.graph must map integer node ids"),
        ("graph", {0.5: [1]}, r"ind.citeseer.graph must map integer node ids"),
        ("graph", {0: 1}, r"ind.citeseer.graph must map integer node ids"),
        # Labels were the argmax of any row: NaN, multi-hot and all-2 rows made up classes.
        ("ally", _one_hot(np.zeros(NUM_ALL, dtype=int)) * np.nan, "ally must hold one-hot"),
        ("ally", np.ones((NUM_ALL, NUM_CLASSES)), "ally must hold one-hot"),
        ("ally", np.full((NUM_ALL, NUM_CLASSES), 2), "ally must hold one-hot"),
        ("ty", np.full((37, NUM_CLASSES), 0.5), "ty must hold one-hot"),
    ],
)
def test_inconsistent_files_raise(tmp_path, part, replacement, message):
    write_planetoid(tmp_path)
    _dump(tmp_path / f"ind.citeseer.{part}", replacement)
    with pytest.raises(ValueError, match=message):
        read_planetoid_raw(tmp_path, "citeseer")


def test_rows_without_a_one_are_unknown_labels(tmp_path):
    write_planetoid(tmp_path)
    ally = _one_hot(np.zeros(NUM_ALL, dtype=int))
    ally[7] = 0  # no label (as CiteSeer has): recorded as unknown, not as class 0
    _dump(tmp_path / "ind.citeseer.ally", ally)
    labels = read_planetoid_raw(tmp_path, "citeseer").labels
    assert labels[7] == -1 and labels[6] == 0
    assert all(labels[node] == -1 for node in NO_ROW)  # ids without a test row, likewise


def test_test_index_must_follow_allx(tmp_path):
    write_planetoid(tmp_path)
    (tmp_path / "ind.citeseer.test.index").write_text("7\n")
    with pytest.raises(ValueError, match="ty has"):
        read_planetoid_raw(tmp_path, "citeseer")
    (tmp_path / "ind.citeseer.test.index").write_text("abc\n")
    with pytest.raises(ValueError, match="one node id per line"):
        read_planetoid_raw(tmp_path, "citeseer")


def _offline(url, timeout):
    raise urllib.error.URLError("no network")


def test_bundled_cora_needs_no_network(tmp_path, monkeypatch):
    monkeypatch.setenv("GALFAST_DATA", str(tmp_path))
    ds = planetoid("cora", opener=_offline)
    assert (ds.num_nodes, ds.graph.num_edges // 2, ds.num_features, ds.num_classes) == (
        2708,
        5278,
        1433,
        7,
    )
    assert (ds.train_mask.sum(), ds.val_mask.sum(), ds.test_mask.sum()) == (140, 500, 1000)
    assert set(ds.x.unique().tolist()) == {0.0, 1.0}
    assert ds.attribute_nodes.numel() == 2708 and ds.notes == ()
    assert list(tmp_path.iterdir()) == []


def test_bundled_cora_is_small_and_licensed():
    assert (BUNDLED_DIR / "cora.npz").stat().st_size < 1_000_000
    notice = (BUNDLED_DIR / "LICENSE-planetoid.txt").read_text()
    assert "MIT License" in notice and "Zhilin Yang" in notice


def _serve(folder):
    """An opener serving `folder`'s files for the planetoid URLs."""

    def opener(url, timeout):
        path = folder / url.rsplit("/", 1)[1]
        if not path.is_file():
            raise urllib.error.URLError(f"404 {url}")
        response = io.BytesIO(path.read_bytes())
        response.headers = {"Content-Length": str(path.stat().st_size)}
        return response

    return opener


def _pin_fixture_hashes(monkeypatch, folder, name):
    hashes = dict(planetoid_loader._SHA256)
    for path in folder.glob(f"ind.{name}.*"):
        hashes[(name, path.name.split(".", 2)[2])] = hashlib.sha256(path.read_bytes()).hexdigest()
    monkeypatch.setattr(planetoid_loader, "_SHA256", hashes)


def test_download_into_cache_then_reuse(tmp_path, monkeypatch):
    upstream = tmp_path / "upstream"
    truth = write_planetoid(upstream)
    _pin_fixture_hashes(monkeypatch, upstream, "citeseer")
    monkeypatch.setenv("GALFAST_DATA", str(tmp_path / "cache"))
    ds = planetoid("citeseer", opener=_serve(upstream))
    assert torch.equal(ds.x, torch.from_numpy(truth["features"]))
    cached = sorted(p.name for p in (tmp_path / "cache" / "planetoid").iterdir())
    assert cached == sorted(
        f"ind.citeseer.{p}" for p in ("y", "ty", "ally", "allx", "tx", "graph", "test.index")
    )
    again = planetoid("citeseer", opener=_offline)
    assert torch.equal(again.x, ds.x)


def test_download_with_tampered_file_is_refused(tmp_path, monkeypatch):
    upstream = tmp_path / "upstream"
    write_planetoid(upstream)  # real Cora hashes are pinned: fixture files cannot match
    monkeypatch.setenv("GALFAST_DATA", str(tmp_path / "cache"))
    with pytest.raises(ValueError, match="SHA-256 mismatch for ind.citeseer"):
        planetoid("citeseer", opener=_serve(upstream))


def test_download_without_features_falls_back_to_structure(tmp_path, monkeypatch):
    upstream = tmp_path / "upstream"
    write_planetoid(upstream, name="pubmed", parts={"y", "ty", "ally", "tx", "graph", "test.index"})
    _pin_fixture_hashes(monkeypatch, upstream, "pubmed")
    monkeypatch.setenv("GALFAST_DATA", str(tmp_path / "cache"))
    with pytest.warns(MissingFeaturesWarning, match=r"ind.pubmed.allx unavailable \(.*404"):
        ds = planetoid("pubmed", opener=_serve(upstream))
    assert ds.x is None and ds.num_nodes == NUM_NODES


def test_offline_without_copy_lists_urls_and_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("GALFAST_DATA", str(tmp_path))
    with pytest.raises(DatasetNotFoundError) as info:
        planetoid("citeseer", opener=_offline)
    message = str(info.value)
    assert "https://github.com/kimiyoung/planetoid/raw/master/data/ind.citeseer.graph" in message
    assert str(tmp_path / "planetoid") in message and "no network" in message
    with pytest.raises(DatasetNotFoundError, match="download=False"):
        planetoid("pubmed", download=False)


def test_unknown_name():
    with pytest.raises(ValueError, match="unknown Planetoid dataset 'reddit'"):
        planetoid("reddit")


# ------------------------------------------------------------------ the real copies
README_COUNTS = {  # ../shared/data/README.md: nodes, undirected edges, features, classes
    "cora": (2708, 5278, 1433, 7),
    "citeseer": (3327, 4552, 3703, 6),
    "pubmed": (19717, 44324, 500, 3),
}


@needs_shared
@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_real_counts(name):
    ds = planetoid(name, root=SHARED)
    assert (ds.num_nodes, ds.graph.num_edges // 2, ds.num_features, ds.num_classes) == (
        README_COUNTS[name]
    )
    assert ds.test_mask.sum() == 1000 and ds.val_mask.sum() == 500
    assert ds.train_mask.sum() == 20 * ds.num_classes
    assert ds.attribute_nodes.numel() == ds.num_nodes - (15 if name == "citeseer" else 0)


@needs_shared
def test_real_pubmed_loads_structure_only():
    with pytest.warns(MissingFeaturesWarning):
        ds = planetoid("pubmed", root=SHARED)
    nodes, edges, _, classes = README_COUNTS["pubmed"]
    assert (ds.num_nodes, ds.graph.num_edges // 2, ds.num_classes, ds.x) == (
        nodes,
        edges,
        classes,
        None,
    )
    assert ds.train_mask.sum() == 60


@needs_shared
def test_cache_folder_is_used_when_complete(monkeypatch):
    monkeypatch.setenv("GALFAST_DATA", str(SHARED.parent))
    ds = planetoid("citeseer", opener=_offline, download=False)
    assert ds.num_nodes == 3327


@needs_shared
def test_bundled_cora_equals_the_raw_files():
    raw, bundled = read_planetoid_raw(SHARED, "cora"), load_bundled(BUNDLED_DIR / "cora.npz")
    assert (raw.features != bundled.features).nnz == 0
    for field in ("labels", "pairs", "train_index", "val_index", "test_index"):
        np.testing.assert_array_equal(getattr(raw, field), getattr(bundled, field))


@needs_shared
@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_matches_pyg_reader(name):
    pyg_io = pytest.importorskip("torch_geometric.io.planetoid")
    ref = pyg_io.read_planetoid_data(os.fspath(SHARED), name)
    ds = planetoid(name, root=SHARED)
    assert torch.equal(ds.x, ref.x)
    known = ds.y >= 0  # PyG calls CiteSeer's 15 label-less nodes class 0
    assert torch.equal(ds.y[known], ref.y[known]) and (ref.y[~known] == 0).all()
    assert _pair_set(ds.graph.edge_index()) == _pair_set(ref.edge_index)
    for ours, theirs in [(ds.train_mask, ref.train_mask), (ds.val_mask, ref.val_mask)]:
        assert torch.equal(ours, theirs)
    assert torch.equal(ds.test_mask, ref.test_mask)
