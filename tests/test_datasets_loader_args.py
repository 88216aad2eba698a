"""Arguments of galfast.datasets' loaders, helpers and dataset methods: a bad value is a
ValueError naming the argument (never a TypeError or AttributeError from pathlib, NumPy or
torch, never silently taken), NumPy and 0-d tensor integers give what the Python int gives.
Everything runs on small files in tmp_path, offline."""

from __future__ import annotations

import os
import urllib.error
from dataclasses import fields

import numpy as np
import pytest
import torch
from qm9_fixture import write_canonical

from galfast.datasets import (
    complete_graph,
    data_dir,
    fb15k_237,
    load,
    movielens,
    paper_split,
    planetoid,
    qm9,
    random_link_split,
    sample_negative_edges,
    synthetic,
    synthetic_graph,
    target_statistics,
    with_distance,
    wn18rr,
)
from galfast.datasets.registry import loader_defaults

QM9 = dict(source="canonical", download=False)  # never the minutes of the qm9pack parse


def offline(url, timeout):
    raise urllib.error.URLError("no network in tests")


@pytest.fixture(autouse=True)
def empty_cache(tmp_path, monkeypatch):
    """An empty cache: no loader reads the user's, and none may download into it."""
    monkeypatch.setenv("GALFAST_DATA", str(tmp_path / "cache"))


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("not a folder")
    return path


@pytest.fixture
def ml(tmp_path):
    """A tiny ML-100K: 3 users, 3 movies, 6 ratings."""
    folder = tmp_path / "ml-100k"
    folder.mkdir()
    ratings = [(1, 1, 5), (1, 2, 3), (2, 2, 4), (2, 3, 1), (3, 1, 2), (3, 3, 4)]
    (folder / "u.data").write_text("".join(f"{u}\t{m}\t{r}\t881250949\n" for u, m, r in ratings))
    users = ["1|24|M|technician|85711", "2|53|F|other|94043", "3|23|M|writer|32067"]
    (folder / "u.user").write_text("\n".join(users) + "\n")
    genres = "|".join("0" * 18 + "1")
    (folder / "u.item").write_text(
        "".join(f"{i}|Movie {i} (1995)|01-Jan-1995||http://x/{i}|{genres}\n" for i in (1, 2, 3))
    )
    return tmp_path


@pytest.fixture
def qm9_root(tmp_path):
    return write_canonical(tmp_path / "qm9")


def _same_link_split(a, b) -> bool:
    names = ("train_pos", "val_pos", "val_neg", "test_pos", "test_neg")
    return all(torch.equal(getattr(a, n), getattr(b, n)) for n in names)


# ------------------------------------------------------------------ roots


def _loaders(wn_folder, fb_folder, ml, qm9_root):
    """Each loader as root -> dataset, offline."""
    return {
        "planetoid": lambda root: planetoid("cora", root=root, download=False, opener=offline),
        "movielens": lambda root: movielens("100k", root=root, download=False, opener=offline),
        "qm9": lambda root: qm9(root, opener=offline, **QM9),
        "wn18rr": lambda root: wn18rr(root=root, download=False, opener=offline),
        "fb15k_237": lambda root: fb15k_237(root=root, download=False, opener=offline),
    }


LOADERS = ("planetoid", "movielens", "qm9", "wn18rr", "fb15k_237")


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize(
    "root, message",
    [
        (3, "root must be a path"),  # TypeError from pathlib
        (2.5, "root must be a path"),
        (True, "root must be a path"),
        (["data"], "root must be a path"),
        ("", "root must be a non-empty path"),  # the working folder, silently
        ("data\0x", "root must not contain a NUL"),
    ],
)
def test_a_root_that_is_no_path_is_refused(
    loader, root, message, wn_folder, fb_folder, ml, qm9_root
):
    with pytest.raises(ValueError, match=message):
        _loaders(wn_folder, fb_folder, ml, qm9_root)[loader](root)


@pytest.mark.parametrize("loader", LOADERS)
def test_a_root_that_is_a_file_is_refused(loader, a_file, wn_folder, fb_folder, ml, qm9_root):
    # was "no files under .../notes.txt"; qm9 parsed for minutes, then failed writing its cache
    with pytest.raises(ValueError, match="root must be a folder, .*notes.txt is a file"):
        _loaders(wn_folder, fb_folder, ml, qm9_root)[loader](a_file)


@pytest.mark.parametrize("loader", ("planetoid", "movielens", "wn18rr", "fb15k_237"))
@pytest.mark.parametrize("where", ("empty", "missing"))
def test_a_root_without_the_data_says_what_is_missing(
    loader, where, tmp_path, wn_folder, fb_folder, ml
):
    root = tmp_path / where
    if where == "empty":
        root.mkdir()
    with pytest.raises(FileNotFoundError, match="no .* under"):  # DatasetNotFoundError
        _loaders(wn_folder, fb_folder, ml, None)[loader](root)


class _BytesPath:
    def __init__(self, path):
        self.path = path

    def __fspath__(self):
        return os.fsencode(self.path)


@pytest.mark.parametrize("form", [os.fsencode, _BytesPath, str])
def test_bytes_and_path_like_roots_read_the_same_folder(form, wn_folder):
    plain = wn18rr(root=wn_folder)
    given = wn18rr(root=form(wn_folder))
    assert given.entities == plain.entities and torch.equal(given.train, plain.train)
    assert torch.equal(given.attributes["sense"], plain.attributes["sense"])


def test_a_cache_setting_that_names_a_file_is_refused(a_file, monkeypatch):
    monkeypatch.setenv("GALFAST_DATA", str(a_file))
    with pytest.raises(ValueError, match="GALFAST_DATA must be a folder"):
        data_dir()


# ------------------------------------------------------------------ openers


@pytest.mark.parametrize("opener", [None, 3, "urlopen"])
@pytest.mark.parametrize("loader", LOADERS)
def test_an_opener_must_be_callable_even_without_downloads(
    loader, opener, wn_folder, fb_folder, ml, qm9_root
):
    # None failed with "'NoneType' object is not callable" once a file had to be downloaded
    call = {
        "planetoid": lambda: planetoid("cora", download=False, opener=opener),
        "movielens": lambda: movielens("100k", ml, opener=opener),
        "qm9": lambda: qm9(qm9_root, opener=opener, **QM9),
        "wn18rr": lambda: wn18rr(root=wn_folder, opener=opener),
        "fb15k_237": lambda: fb15k_237(root=fb_folder, top_types=3, opener=opener),
    }[loader]
    with pytest.raises(ValueError, match="opener must be a callable"):
        call()


# ------------------------------------------------------------------ names and modes


@pytest.mark.parametrize("name", [None, 3, ["cora"], np.array(["cora"])])
def test_planetoid_names_must_be_strings(name):
    # None: AttributeError "'NoneType' object has no attribute 'lower'"
    with pytest.raises(ValueError, match="name must be one of"):
        planetoid(name)


@pytest.mark.parametrize("name", ["CORA", np.str_("cora")])
def test_planetoid_names_in_any_case_and_numpy_strings(name):
    given, plain = planetoid(name, download=False), planetoid("cora", download=False)
    assert given.name == "cora" and _same_link_split(given.link_split, plain.link_split)


@pytest.mark.parametrize("version", [None, 1, ["1m"], np.array(["1m"])])
def test_movielens_versions_must_be_strings(version, ml):
    # a list: TypeError "unhashable type"
    with pytest.raises(ValueError, match="version must be one of"):
        movielens(version, root=ml)


@pytest.mark.parametrize("value", [None, ["keep"], "Keep"])
def test_movielens_unrated_movies_is_keep_or_drop(value, ml):
    with pytest.raises(ValueError, match="unrated_movies must be one of"):
        movielens("100k", root=ml, unrated_movies=value)


@pytest.mark.parametrize("source", [None, ["auto"], np.array(["auto"]), "pyg"])
def test_qm9_sources_must_be_named(source, qm9_root):
    with pytest.raises(ValueError, match="source must be one of"):
        qm9(qm9_root, source=source, download=False)


@pytest.mark.parametrize("name", [None, ["cora"], np.array(["cora"]), "imdb"])
def test_load_names_must_be_dataset_names(name):
    # an array: AttributeError "'numpy.ndarray' object has no attribute 'startswith'"
    with pytest.raises(ValueError, match="name must be one of"):
        load(name)
    # loader_defaults raised a KeyError for an unknown name
    with pytest.raises(ValueError, match="name must be one of"):
        loader_defaults(name)


@pytest.mark.parametrize("kind", [None, ["graph"]])
def test_synthetic_kinds_must_be_named(kind):
    with pytest.raises(ValueError, match="unknown synthetic kind"):  # a list: unhashable
        synthetic(kind)


# ------------------------------------------------------------------ counts, seeds, fractions


@pytest.mark.parametrize("workers", [2.5, 2.0, "2", True, 0, -1, np.float64(2)])
def test_qm9_workers_are_counts_checked_before_any_parse(workers, tmp_path):
    # 2.5: TypeError from the process pool, after the qm9pack files were read
    with pytest.raises(ValueError, match="workers must"):
        qm9(tmp_path / "no-qm9-here", workers=workers, **QM9)


@pytest.mark.parametrize("workers", [np.int64(2), torch.tensor(2)])
def test_qm9_takes_numpy_and_tensor_worker_counts(workers, qm9_root):
    assert torch.equal(qm9(qm9_root, workers=workers, **QM9).y, qm9(qm9_root, workers=2, **QM9).y)


@pytest.mark.parametrize("molecules", [2.5, 0, True, "2", 7])
def test_load_qm9_molecules_is_named_in_its_errors(molecules, qm9_root):
    # was "count must be an int in [1, 6]": the argument of an inner call
    with pytest.raises(ValueError, match="molecules must"):
        load("qm9", root=qm9_root, molecules=molecules, **QM9)


@pytest.mark.parametrize("molecules", [np.int64(3), torch.tensor(3)])
def test_load_qm9_takes_numpy_molecule_counts(molecules, qm9_root):
    given = load("qm9", root=qm9_root, molecules=molecules, **QM9)
    assert torch.equal(given.ids, load("qm9", root=qm9_root, molecules=3, **QM9).ids)


BAD_SEEDS = [-1, 2.5, True, None, "1", torch.tensor(1.0)]


@pytest.mark.parametrize("seed", BAD_SEEDS)
def test_planetoid_seeds_are_checked(seed):
    # -1 and 2.5 failed inside NumPy's SeedSequence, True was seed 1
    with pytest.raises(ValueError, match="^seed must (be an int, got|be >= 0, got -1)"):
        planetoid("cora", seed=seed, download=False)


@pytest.mark.parametrize("seed", BAD_SEEDS)
def test_movielens_seeds_are_checked_before_the_files_are_read(seed, tmp_path):
    with pytest.raises(ValueError, match="^seed must (be an int, got|be >= 0, got -1)"):
        movielens("100k", root=tmp_path / "absent", seed=seed)


@pytest.mark.parametrize("seed", [-1, 2.5, True, "x"])
def test_load_checks_the_seed_of_datasets_that_ignore_it(seed, wn_folder):
    with pytest.raises(ValueError, match="^seed must (be an int, got|be >= 0, got -1)"):
        load("wn18rr", root=wn_folder, seed=seed)


@pytest.mark.parametrize("seed", [np.int64(3), np.uint8(3), torch.tensor(3)])
def test_numpy_and_tensor_seeds_split_as_the_int_does(seed, ml):
    plain, given = (planetoid("cora", seed=s, download=False) for s in (3, seed))
    assert _same_link_split(given.link_split, plain.link_split)
    ratings = movielens("100k", root=ml, seed=3, test_fraction=0.5)
    given = movielens("100k", root=ml, seed=seed, test_fraction=0.5)
    assert torch.equal(given.test_idx, ratings.test_idx)


@pytest.mark.parametrize("fraction", [float("nan"), float("inf"), 1.0, -0.1, "0.1", True, None])
def test_movielens_test_fraction_is_checked_before_the_files_are_read(fraction, tmp_path):
    with pytest.raises(ValueError, match="test_fraction must"):
        movielens("100k", root=tmp_path / "absent", test_fraction=fraction)


@pytest.mark.parametrize("cap", [1, 2.5, True, "3", None, 10**6])
def test_wn18rr_sense_cap_is_checked_without_attributes_too(cap, wn_folder):
    # only checked when the attribute file was read; 10**9 built a billion class names
    with pytest.raises(ValueError, match=r"^sense_cap must (be an int, got|lie in \[2, 1001\))"):
        wn18rr(root=wn_folder, sense_cap=cap, attributes=False)


def test_wn18rr_takes_a_numpy_sense_cap(wn_folder):
    given, plain = (
        wn18rr(root=wn_folder, sense_cap=np.int64(3)),
        wn18rr(root=wn_folder, sense_cap=3),
    )
    assert torch.equal(given.attributes["sense"], plain.attributes["sense"])


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(top_types=0), "top_types must be >= 1, got 0"),
        (dict(top_types=2.0), "top_types must be an int, got float"),
        (dict(types_known="some"), "types_known must be one of"),
        (dict(types_known=["top"]), "types_known must be one of"),  # unhashable
    ],
)
def test_fb15k_237_type_options_are_checked_without_attributes_too(options, message, fb_folder):
    with pytest.raises(ValueError, match=message):
        fb15k_237(root=fb_folder, attributes=False, **options)


@pytest.mark.parametrize("loader", ("wn18rr", "fb15k_237"))
@pytest.mark.parametrize("flag", ["no", 0, None])
def test_knowledge_graph_attributes_is_a_flag(loader, flag, wn_folder, fb_folder):
    # "no" is truthy: the attributes were read
    call = {"wn18rr": lambda: wn18rr(root=wn_folder, attributes=flag)}
    call["fb15k_237"] = lambda: fb15k_237(root=fb_folder, top_types=3, attributes=flag)
    with pytest.raises(ValueError, match="attributes must be a bool"):
        call[loader]()


def test_paper_split_refuses_a_negative_molecule_count():
    # num_test = num_val = 0 passed, then torch.arange(-5) failed
    with pytest.raises(ValueError, match="num_molecules must be >= 0"):
        paper_split(-5, num_test=0, num_val=0)


def test_target_statistics_needs_rows_of_targets():
    with pytest.raises(ValueError, match="y must have a row per molecule"):  # IndexError
        target_statistics(torch.tensor(1.0), torch.tensor([0]))


# ------------------------------------------------------------------ link helpers

PAIRS = np.array([[0, 0, 1, 2], [1, 2, 3, 4]])


@pytest.mark.parametrize("num_nodes", [True, 5.0, np.float64(5), -1, "5"])
def test_random_link_split_checks_num_nodes(num_nodes):
    with pytest.raises(ValueError, match="num_nodes must"):
        random_link_split(PAIRS, num_nodes, val_fraction=0.25, test_fraction=0.25)


@pytest.mark.parametrize("seed", BAD_SEEDS)
def test_random_link_split_checks_the_seed(seed):
    with pytest.raises(ValueError, match="^seed must (be an int, got|be >= 0, got -1)"):
        random_link_split(PAIRS, 5, seed=seed)


@pytest.mark.parametrize("given", [np.int64(5), torch.tensor(5)])
def test_random_link_split_takes_numpy_node_counts_and_seeds(given):
    plain = random_link_split(PAIRS, 5, val_fraction=0.25, test_fraction=0.25, seed=5)
    other = random_link_split(PAIRS, given, val_fraction=0.25, test_fraction=0.25, seed=given)
    assert _same_link_split(other, plain)


@pytest.mark.parametrize("rng", [0, None, np.random.RandomState(0)])
def test_negative_sampling_needs_a_generator(rng):
    # an int seed: AttributeError "'int' object has no attribute 'integers'"
    with pytest.raises(ValueError, match="rng must be a numpy.random.Generator"):
        sample_negative_edges(5, PAIRS, 2, rng)


@pytest.mark.parametrize("num_nodes", [5.5, True, -3, None])
def test_negative_sampling_checks_num_nodes(num_nodes):
    # 5.5 and True drew pairs; -3 with count 0 returned an empty draw
    with pytest.raises(ValueError, match="num_nodes must"):
        sample_negative_edges(num_nodes, np.zeros((2, 0), np.int64), 0, np.random.default_rng(0))


@pytest.mark.parametrize(
    "forbidden", [None, np.array([[0.5], [1.5]]), np.array([0, 1, 2, 3]), np.ones((2, 1), bool)]
)
def test_negative_sampling_checks_the_forbidden_pairs(forbidden):
    # floats were truncated, a flat array reshaped into pairs, None failed in a comparison
    with pytest.raises(ValueError, match="forbidden must be a"):
        sample_negative_edges(5, forbidden, 2, np.random.default_rng(0))


@pytest.mark.parametrize("count", [np.int64(3), torch.tensor(3)])
def test_negative_sampling_takes_numpy_and_tensor_counts(count):
    plain = sample_negative_edges(6, PAIRS, 3, np.random.default_rng(1))
    given = sample_negative_edges(np.int64(6), PAIRS, count, np.random.default_rng(1))
    assert np.array_equal(given, plain)


# ------------------------------------------------------------------ molecule batches


def test_with_distance_refuses_what_is_no_batch():
    with pytest.raises(ValueError, match="batch must be a MoleculeBatch"):  # AttributeError
        with_distance(None)


@pytest.mark.parametrize("flag", ["no", 1, None])
def test_complete_graph_distance_is_a_flag(flag, qm9_root):
    batch = qm9(qm9_root, **QM9).batch([0, 1])
    with pytest.raises(ValueError, match="distance must be a bool"):
        complete_graph(batch, distance=flag)


# ------------------------------------------------------------------ .to(device)


def _moved(kind, wn_folder, ml, qm9_root):
    if kind == "graph":
        return synthetic_graph(30, num_features=4)
    if kind == "link_split":
        return synthetic_graph(30, num_features=4).link_split
    if kind == "ratings":
        return movielens("100k", root=ml)
    if kind == "knowledge_graph":
        return wn18rr(root=wn_folder)
    molecules = qm9(qm9_root, **QM9)
    return molecules if kind == "molecules" else molecules.batch([0, 1])


KINDS = ("graph", "link_split", "ratings", "knowledge_graph", "molecules", "batch")


@pytest.mark.parametrize("kind", KINDS)
def test_to_refuses_what_is_no_device(kind, wn_folder, ml, qm9_root):
    # None, 2.5: TypeError listing torch.device's overloads; "gpu": RuntimeError
    dataset = _moved(kind, wn_folder, ml, qm9_root)
    for device in (None, 2.5, True, "gpu", -1, [0]):
        with pytest.raises(ValueError, match="device must be a torch.device"):
            dataset.to(device)


@pytest.mark.parametrize("kind", KINDS)
def test_to_takes_a_device_name_or_a_torch_device(kind, wn_folder, ml, qm9_root):
    dataset = _moved(kind, wn_folder, ml, qm9_root)
    by_name, by_device = dataset.to("cpu"), dataset.to(torch.device("cpu"))
    assert type(by_name) is type(by_device) is type(dataset)
    for field in fields(dataset):
        value = getattr(by_name, field.name)
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, getattr(by_device, field.name)), field.name
