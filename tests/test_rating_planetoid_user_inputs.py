"""The rating and Planetoid pipelines driven by hand, as a user of the Python API does: files a
shared data folder's other users can read, datasets built without the loaders, and odd but
legal inputs."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import stat

import numpy as np
import pytest
import torch

from galfast.datasets import edge_homophily, synthetic_movielens
from galfast.datasets.download import Resource, fetch
from galfast.datasets.graph_dataset import build_graph_dataset
from galfast.datasets.rating_dataset import build_rating_dataset
from galfast.experiments import ConfigError, ExperimentConfig, prepare, runner
from galfast.experiments.planetoid import link_auc


class _Response(io.BytesIO):
    headers: dict = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_downloaded_files_get_the_mode_open_gives(tmp_path):
    data = b"raw planetoid bytes"
    resource = Resource("https://example.org/a", "ind.x.y", hashlib.sha256(data).hexdigest())
    umask = os.umask(0o022)
    try:
        path = fetch(
            resource, tmp_path, opener=lambda url, timeout: _Response(data), progress=False
        )
    finally:
        os.umask(umask)
    assert path.read_bytes() == data
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # 0600 before: unreadable to the group
    assert [p.name for p in tmp_path.iterdir()] == ["ind.x.y"]  # no partial file left


def _graph_dataset(attributes, attribute_classes, attribute_nodes, dtype=np.int64):
    num_nodes = 12
    chain = np.stack([np.arange(num_nodes - 1), np.arange(1, num_nodes)]).astype(dtype)
    return build_graph_dataset(
        name="toy",
        pairs=chain,
        num_nodes=num_nodes,
        x=np.ones((num_nodes, 3)),
        y=np.zeros(num_nodes),
        num_classes=2,
        split=(np.arange(4), np.arange(4, 8), np.arange(8, 12)),
        attributes=attributes,
        attribute_classes=attribute_classes,
        attribute_nodes=attribute_nodes,
        license="",
        notes=(),
        seed=0,
        val_fraction=0.2,
        test_fraction=0.3,
    )


def test_a_dataset_without_attributes_is_a_config_error(monkeypatch):
    dataset = _graph_dataset({}, {}, np.zeros(0))
    monkeypatch.setattr(runner, "load_dataset", lambda *args: dataset)
    with pytest.raises(ConfigError, match="toy has no attribute") as error:
        prepare(ExperimentConfig(dataset="cora"))  # a bare StopIteration before
    assert error.value.field == "dataset"


def test_without_the_setups_attribute_the_first_one_is_hidden(monkeypatch):
    codes = np.array([0, 1] * 6)
    dataset = _graph_dataset({"colour": codes}, {"colour": ("red", "blue")}, np.arange(12))
    monkeypatch.setattr(runner, "load_dataset", lambda *args: dataset)
    assert [a.name for a in prepare(ExperimentConfig(dataset="cora")).attributes] == ["colour"]


def _rating_dataset(user_index, movie_index, rating, num_users=200, num_movies=101):
    return build_rating_dataset(
        name="toy",
        user_index=user_index,
        movie_index=movie_index,
        rating=rating,
        num_users=num_users,
        num_movies=num_movies,
        attributes={"gender": np.zeros(num_users, dtype=np.int64)},
        attribute_classes={"gender": ("F", "M")},
        raw_user_ids=np.arange(num_users),
        raw_movie_ids=np.arange(num_movies),
        movie_titles=None,
        license="",
        notes=(),
        seed=0,
        test_fraction=0.5,
    )


def test_narrow_integer_ids_stay_movie_nodes():
    users, movies = np.array([0, 199], dtype=np.uint8), np.array([100, 1], dtype=np.uint8)
    ratings = _rating_dataset(users, movies, np.array([5, 3], dtype=np.int32)).ratings
    # uint8 movie 100 + 200 users wrapped around to node 44, a user
    assert ratings.tolist() == [[0, 300, 5], [199, 201, 3]]


def test_lists_and_whole_float_stars_are_taken():
    ratings = _rating_dataset([0, 1], [2, 3], [4.0, 1.0]).ratings
    assert ratings.tolist() == [[0, 202, 4], [1, 203, 1]]


@pytest.mark.parametrize("bad", [4.5, float("nan"), float("inf")])
def test_a_fractional_star_is_refused_not_truncated(bad):
    with pytest.raises(ValueError, match=f"rating {bad} is not a whole number"):
        _rating_dataset([0, 1], [2, 3], [bad, 3.0])  # 4.5 became 4 stars


@pytest.mark.parametrize(
    "user_index, movie_index, rating, message",
    [
        (np.array([0.0, 1.0]), [2, 3], [4, 5], "user_index must be a 1-D array of integers"),
        ([0, 1], [[2, 3]], [4, 5], "movie_index must be a 1-D array of integers"),
        ([0, 1], [2, 3], [True, False], "rating must be a 1-D array of integers"),
        ([0, 1, 2], [2, 3], [4, 5], "hold 3, 2 and 2 entries"),
    ],
)
def test_malformed_rating_columns_are_named(user_index, movie_index, rating, message):
    with pytest.raises(ValueError, match=message):
        _rating_dataset(user_index, movie_index, rating)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32])
def test_edge_homophily_of_narrow_integer_edges(dtype):
    # 4 edges on 4 nodes: a uint8 edge_index was read as a boolean mask, every edge "same"
    edge_index = torch.tensor([[1, 2, 3, 1], [2, 3, 1, 3]])
    labels = torch.tensor([0, 0, 1, 1])
    assert edge_homophily(edge_index.to(dtype), labels) == 0.25


def _scored_edges():
    z = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    pos = torch.tensor([[0, 2], [1, 2]])  # scores 1, 1
    neg = torch.tensor([[0, 1, 2], [3, 2, 3]])  # scores -1, 0, 0
    return z, pos, neg


def test_link_auc_takes_narrow_integer_pairs():
    z, pos, neg = _scored_edges()
    assert link_auc(z, pos, neg) == 1.0
    assert link_auc(z, pos.int(), neg.int()) == 1.0
    assert link_auc(z, pos.to(torch.uint8), neg.to(torch.uint8)) == 1.0  # indexed as a mask


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda pos: torch.tensor([[0, 1], [2, 2], [1, 2]]), r"pos must be a \[2, E\] tensor"),
        (lambda pos: torch.tensor([[0, -1], [1, 2]]), "pos holds node -1, outside the 4 rows"),
        (lambda pos: torch.tensor([[0, 4], [1, 2]]), "pos holds node 4, outside the 4 rows"),
        (lambda pos: pos[:, :0], "pos must hold at least one pair"),
        (lambda pos: pos.float(), "pos must hold at least one pair of integer node ids"),
    ],
)
def test_link_auc_refuses_pairs_it_would_misread(edit, message):
    z, pos, neg = _scored_edges()
    with pytest.raises(ValueError, match=message):
        link_auc(z, edit(pos), neg)


def _replaced(dataset, **fields):
    return dataclasses.replace(dataset, **fields)


@pytest.fixture(scope="module")
def small_ratings():
    return synthetic_movielens(num_users=30, num_movies=20, num_ratings=120, seed=0)


def test_splits_sharing_a_rating_are_refused(small_ratings):
    # A test rating also trained on leaked into the test RMSE without an error.
    shared = torch.cat([small_ratings.train_idx, small_ratings.test_idx[:1]])
    with pytest.raises(ValueError, match="train_idx and test_idx share ratings"):
        _replaced(small_ratings, train_idx=shared)


@pytest.mark.parametrize(
    "column, value, message",
    [
        (0, 30, r"column 0 must hold user nodes in \[0, 30\)"),
        (1, 0, r"column 1 must hold movie nodes in \[30, 50\)"),
        (2, 6, r"column 2 must hold stars in \[1, 6\)"),
    ],
)
def test_ratings_out_of_their_ranges_are_refused(small_ratings, column, value, message):
    ratings = small_ratings.ratings.clone()
    ratings[3, column] = value
    with pytest.raises(ValueError, match=message):
        _replaced(small_ratings, ratings=ratings)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("train_idx", torch.tensor([0, 500]), r"train_idx holds a row outside \[0, 120\)"),
        ("test_idx", torch.tensor([1.0]), "test_idx must be a 1-D tensor of row indices"),
        ("ratings", None, "ratings must hold integers"),
    ],
)
def test_malformed_splits_and_ratings_are_named(small_ratings, field, value, message):
    if field == "ratings":
        value = small_ratings.ratings.double()
    with pytest.raises(ValueError, match=message):
        _replaced(small_ratings, **{field: value})


def test_narrow_pairs_give_the_int64_link_split():
    # uint16 pairs built the graph from an int64 copy but handed the link split the original,
    # which refused them naming an "edge_index" the caller never passed.
    codes = {"a": np.zeros(12, dtype=np.int64)}
    args = (codes, {"a": ("x", "y")}, np.arange(12))
    wide, narrow = _graph_dataset(*args), _graph_dataset(*args, dtype=np.uint16)
    for name in ("train_pos", "val_pos", "test_pos", "val_neg", "test_neg"):
        assert torch.equal(getattr(wide.link_split, name), getattr(narrow.link_split, name))
