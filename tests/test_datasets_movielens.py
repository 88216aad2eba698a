"""MovieLens parsing on fixtures written in exactly the GroupLens formats (the licence forbids
shipping the real files)."""

from __future__ import annotations

import dataclasses
import hashlib
import urllib.error
import zipfile

import numpy as np
import pytest
import torch

from galfast.datasets import ChecksumError, DatasetNotFoundError, movielens, movielens_loader
from galfast.datasets.download import Resource
from galfast.datasets.movielens_loader import (
    AGE_GROUPS,
    OCCUPATIONS_1M,
    OCCUPATIONS_100K,
    age_group,
)

# ml-1m/users.dat: UserID::Gender::Age::Occupation::Zip-code (ages are codes, not years).
USERS_1M = [
    (1, "F", 1, 10, "48067"),
    (2, "M", 56, 16, "70072"),
    (3, "M", 25, 15, "55117"),
    (5, "M", 25, 20, "55455"),
    (6, "F", 50, 9, "55117"),
    (10, "F", 35, 0, "95370"),
    (11, "F", 18, 4, "04093"),
    (12, "M", 45, 12, "32793-7303"),
]
# ml-1m/movies.dat: MovieID::Title::Genres. 3 is never rated; titles carry ':' and latin-1.
MOVIES_1M = [
    (1, "Toy Story (1995)", "Animation|Children's|Comedy"),
    (73, "Misérables, Les (1995)", "Drama|Musical"),
    (3, "Grumpier Old Men (1995)", "Comedy|Romance"),
    (260, "Star Wars: Episode IV - A New Hope (1977)", "Action|Adventure|Fantasy|Sci-Fi"),
    (3952, "Contender, The (2000)", "Drama|Thriller"),
]
RATED_1M = [1, 73, 260, 3952]

# ml-100k/u.user: user id | age | gender | occupation | zip code (ages in years).
USERS_100K = [
    (1, 24, "M", "technician", "85711"),
    (2, 53, "F", "other", "94043"),
    (3, 7, "M", "student", "32067"),
    (4, 17, "M", "student", "43537"),
    (5, 18, "F", "writer", "15213"),
    (6, 49, "M", "administrator", "98101"),
    (7, 56, "F", "retired", "91344"),
    (8, 73, "M", "none", "T8H1N"),
]
MOVIES_100K = [
    (1, "Toy Story (1995)", "01-Jan-1995", "http://us.imdb.com/M/title-exact?Toy%20Story%20(1995)"),
    (2, "Misérables, Les (1995)", "01-Jan-1995", "http://us.imdb.com/M/title-exact?Mis%E9rables"),
    (267, "unknown", "", ""),
]


def _ratings(users, movies, count, seed):
    rng = np.random.default_rng(seed)
    pairs = [(u, m) for u in users for m in movies]
    chosen = rng.choice(len(pairs), size=count, replace=False)
    return [(*pairs[i], int(rng.integers(1, 6)), 978300760 + int(i)) for i in chosen]


def write_ml1m(folder, ratings=None):
    """Writes users.dat, movies.dat and ratings.dat in the ML-1M format (latin-1, '::')."""
    folder.mkdir(parents=True, exist_ok=True)
    ratings = ratings or _ratings([u[0] for u in USERS_1M], RATED_1M, 30, seed=1)
    (folder / "users.dat").write_bytes(
        "".join("::".join(map(str, u)) + "\n" for u in USERS_1M).encode("latin-1")
    )
    (folder / "movies.dat").write_bytes(
        "".join("::".join(map(str, m)) + "\n" for m in MOVIES_1M).encode("latin-1")
    )
    (folder / "ratings.dat").write_bytes(
        "".join("::".join(map(str, r)) + "\n" for r in ratings).encode("latin-1")
    )
    return ratings


def write_ml100k(folder):
    """Writes u.data (tab-separated), u.user and u.item ('|', latin-1) in the ML-100K format."""
    folder.mkdir(parents=True, exist_ok=True)
    ratings = _ratings([u[0] for u in USERS_100K], [m[0] for m in MOVIES_100K], 20, seed=2)
    (folder / "u.data").write_text("".join("\t".join(map(str, r)) + "\n" for r in ratings))
    (folder / "u.user").write_text("".join("|".join(map(str, u)) + "\n" for u in USERS_100K))
    genres = "|".join("0" * 18 + "1")
    (folder / "u.item").write_bytes(
        "".join(
            f"{i}|{title}|{date}||{url}|{genres}\n" for i, title, date, url in MOVIES_100K
        ).encode("latin-1")
    )
    return ratings


@pytest.fixture
def ml1m(tmp_path):
    ratings = write_ml1m(tmp_path / "ml-1m")
    return tmp_path, ratings


def test_ml1m_nodes_attributes_and_titles(ml1m):
    root, ratings = ml1m
    ds = movielens("1m", root=root)
    assert (ds.name, ds.num_users, ds.num_movies, ds.num_ratings) == ("movielens-1m", 8, 5, 30)
    assert ds.raw_user_ids.tolist() == [u[0] for u in USERS_1M]
    assert ds.raw_movie_ids.tolist() == [m[0] for m in MOVIES_1M]
    assert ds.movie_titles[1] == "Misérables, Les (1995)"
    assert ds.movie_titles[3] == "Star Wars: Episode IV - A New Hope (1977)"
    assert ds.attributes["gender"].tolist() == [0, 1, 1, 1, 0, 0, 0, 1]
    assert ds.attributes["age"].tolist() == [0, 6, 2, 2, 5, 3, 1, 4]
    assert ds.attributes["occupation"].tolist() == [10, 16, 15, 20, 9, 0, 4, 12]
    assert {k: len(v) for k, v in ds.attribute_classes.items()} == {
        "gender": 2,
        "age": 7,
        "occupation": 21,
    }
    assert ds.attribute_classes["occupation"] == OCCUPATIONS_1M
    assert torch.equal(ds.attribute_nodes, torch.arange(8))
    assert "GroupLens" in ds.license


def test_ml1m_ratings_map_raw_ids_to_nodes(ml1m):
    root, ratings = ml1m
    ds = movielens("1m", root=root)
    user_node = {u[0]: k for k, u in enumerate(USERS_1M)}
    movie_node = {m[0]: 8 + k for k, m in enumerate(MOVIES_1M)}
    expected = [[user_node[u], movie_node[m], r] for u, m, r, _ in ratings]
    assert ds.ratings.tolist() == expected


def test_unrated_movies_are_isolated_nodes_with_a_note(ml1m):
    root, _ = ml1m
    ds = movielens("1m", root=root)
    grumpier = 8 + 2
    assert ds.graph.in_degree[grumpier] == 0 and ds.graph.out_degree[grumpier] == 0
    assert any("1 of 5 movies" in note for note in ds.notes)


def test_unrated_movies_can_be_dropped_as_the_paper_counts(ml1m):
    root, ratings = ml1m
    kept, dropped = movielens("1m", root=root), movielens("1m", root=root, unrated_movies="drop")
    assert dropped.num_movies == kept.num_movies - 1 and dropped.num_users == kept.num_users
    assert dropped.raw_movie_ids.tolist() == RATED_1M  # movies.dat order, Grumpier gone
    assert len(dropped.movie_titles) == dropped.num_movies
    # Same ratings, movie nodes renumbered over the rated movies only.
    movie_node = {m: 8 + k for k, m in enumerate(RATED_1M)}
    user_node = {u[0]: k for k, u in enumerate(USERS_1M)}
    assert dropped.ratings.tolist() == [[user_node[u], movie_node[m], r] for u, m, r, _ in ratings]
    assert dropped.graph.num_nodes == kept.graph.num_nodes - 1
    assert bool((dropped.graph.in_degree[8:] > 0).all())
    assert any("dropped" in note for note in dropped.notes)
    with pytest.raises(ValueError, match="unrated_movies"):
        movielens("1m", root=root, unrated_movies="hide")


def test_graph_holds_training_ratings_both_ways_with_rating_types(ml1m):
    root, _ = ml1m
    ds = movielens("1m", root=root, seed=3)
    users, movies, stars = ds.train_ratings.t()
    expected = {(int(u), int(m), int(s) - 1) for u, m, s in zip(users, movies, stars)}
    expected |= {(m, u, t) for u, m, t in expected}
    src, dst = ds.graph.edge_index()
    got = set(zip(src.tolist(), dst.tolist(), ds.graph.edge_type.tolist()))
    assert got == expected
    held_out = ds.test_ratings[:, :2].tolist()
    assert not any((u, m) in {(a, b) for a, b, _ in expected} for u, m in held_out)


def test_rating_split_is_seeded_disjoint_and_ninety_ten(ml1m):
    root, _ = ml1m
    a, b, c = (movielens("1m", root=root, seed=s) for s in (0, 0, 1))
    assert torch.equal(a.test_idx, b.test_idx) and torch.equal(a.train_idx, b.train_idx)
    assert not torch.equal(a.test_idx, c.test_idx)
    assert a.test_idx.numel() == 3 and a.train_idx.numel() == 27
    both = torch.cat([a.train_idx, a.test_idx]).sort().values
    assert torch.equal(both, torch.arange(30))


def test_root_may_be_the_folder_itself(ml1m):
    root, _ = ml1m
    ds = movielens("1m", root=root / "ml-1m")
    assert ds.num_ratings == 30


def test_ml100k_formats_ages_and_occupations(tmp_path):
    ratings = write_ml100k(tmp_path / "ml-100k")
    ds = movielens("100k", root=tmp_path)
    assert (ds.name, ds.num_users, ds.num_movies, ds.num_ratings) == ("movielens-100k", 8, 3, 20)
    assert ds.movie_titles == ("Toy Story (1995)", "Misérables, Les (1995)", "unknown")
    assert ds.attributes["gender"].tolist() == [1, 0, 1, 1, 0, 1, 0, 1]
    # 24 -> 18-24, 53 -> 50-55, 7 -> under 18, 17 -> under 18, 18 -> 18-24, 49 -> 45-49, 56+.
    assert ds.attributes["age"].tolist() == [1, 5, 0, 0, 1, 4, 6, 6]
    names = [OCCUPATIONS_100K[k] for k in ds.attributes["occupation"].tolist()]
    assert names == [u[3] for u in USERS_100K]
    assert ds.attribute_classes["age"] == AGE_GROUPS
    assert len(ds.attribute_classes["occupation"]) == 21
    user_node = {u[0]: k for k, u in enumerate(USERS_100K)}
    movie_node = {m[0]: 8 + k for k, m in enumerate(MOVIES_100K)}
    assert ds.ratings.tolist() == [[user_node[u], movie_node[m], r] for u, m, r, _ in ratings]


def test_age_group_boundaries():
    years = np.array([1, 17, 18, 24, 25, 34, 35, 44, 45, 49, 50, 55, 56, 90])
    assert age_group(years).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.joinpath("ratings.dat").write_text("1::1::6::0\n"), "rating 6"),
        (lambda d: d.joinpath("ratings.dat").write_text("1::999::4::0\n"), "movie id 999"),
        (lambda d: d.joinpath("ratings.dat").write_text("77::1::4::0\n"), "user id 77"),
        (lambda d: d.joinpath("ratings.dat").write_text("1::1::4\n"), "4 columns"),
        (
            lambda d: d.joinpath("ratings.dat").write_text("1::1::x::0\n"),
            "ratings.dat line 1: expected 4 whole numbers",
        ),
        (lambda d: d.joinpath("ratings.dat").write_text("\n"), "ratings.dat holds no rows"),
        (
            lambda d: d.joinpath("users.dat").write_text("1::F::19::1::0\n"),
            "users.dat line 1: unknown age code 19",
        ),
        (lambda d: d.joinpath("users.dat").write_text("1::X::1::1::0\n"), "unknown gender"),
        (
            lambda d: d.joinpath("users.dat").write_text("1::F::1::21::0\n"),
            "users.dat line 1: occupation codes lie in 0..20, got 21",
        ),
        (lambda d: d.joinpath("users.dat").write_text("1::F::1\n"), "expected 5"),
        (lambda d: d.joinpath("movies.dat").write_text("1|Toy Story\n"), "MovieID::Title"),
        (
            lambda d: d.joinpath("users.dat").write_text("1::F::1::1::0\n1::M::1::1::0\n"),
            "user id is listed twice",
        ),
    ],
)
def test_malformed_files_raise_clear_errors(tmp_path, mutate, message):
    folder = tmp_path / "ml-1m"
    write_ml1m(folder, ratings=[(1, 1, 4, 0)])
    mutate(folder)
    with pytest.raises(ValueError, match=message):
        movielens("1m", root=tmp_path)


def test_missing_root_says_what_to_put_where(tmp_path):
    with pytest.raises(
        DatasetNotFoundError, match=r"ml-1m/.*ratings\.dat, users\.dat, movies\.dat"
    ):
        movielens("1m", root=tmp_path)


def test_unknown_version():
    with pytest.raises(ValueError, match="unknown MovieLens version '20m'"):
        movielens("20m")


def test_offline_without_copy_names_the_url_and_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("GALFAST_DATA", str(tmp_path))

    def offline(url, timeout):
        raise urllib.error.URLError("no network")

    with pytest.raises(DatasetNotFoundError) as info:
        movielens("100k", opener=offline)
    message = str(info.value)
    assert "https://files.grouplens.org/datasets/movielens/ml-100k.zip" in message
    assert str(tmp_path / "ml-100k") in message and "no network" in message
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(DatasetNotFoundError, match="download=False"):
        movielens("1m", download=False)


def _archive(tmp_path):
    staging = tmp_path / "staging"
    write_ml1m(staging / "ml-1m")
    archive = tmp_path / "upstream" / "ml-1m.zip"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in sorted((staging / "ml-1m").iterdir()):
            zipped.write(path, f"ml-1m/{path.name}")
    return archive


def test_download_verifies_extracts_and_caches(tmp_path, monkeypatch):
    archive = _archive(tmp_path)
    cache = tmp_path / "cache"
    monkeypatch.setenv("GALFAST_DATA", str(cache))
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    spec = movielens_loader._VERSIONS["1m"]
    local = Resource(archive.as_uri(), "ml-1m.zip", digest)
    monkeypatch.setitem(movielens_loader._VERSIONS, "1m", dataclasses.replace(spec, archive=local))
    ds = movielens("1m")
    assert ds.num_ratings == 30
    assert sorted(p.name for p in (cache / "ml-1m").iterdir()) == [
        "movies.dat",
        "ratings.dat",
        "users.dat",
    ]
    archive.unlink()  # a second load needs no download
    assert movielens("1m").num_ratings == 30


def test_download_with_wrong_checksum_is_refused(tmp_path, monkeypatch):
    archive = _archive(tmp_path)
    cache = tmp_path / "cache"
    monkeypatch.setenv("GALFAST_DATA", str(cache))
    spec = movielens_loader._VERSIONS["1m"]  # pinned to the real archive's SHA-256
    local = dataclasses.replace(spec.archive, url=archive.as_uri())
    monkeypatch.setitem(movielens_loader._VERSIONS, "1m", dataclasses.replace(spec, archive=local))
    with pytest.raises(ChecksumError, match="ml-1m.zip"):
        movielens("1m")
    assert list(cache.iterdir()) == []


def test_hand_placed_archive_is_verified_before_extraction(tmp_path, monkeypatch):
    archive = _archive(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "ml-1m.zip").write_bytes(archive.read_bytes())
    monkeypatch.setenv("GALFAST_DATA", str(cache))

    def offline(url, timeout):
        raise AssertionError("a placed archive needs no download")

    with pytest.raises(ChecksumError, match="ml-1m.zip"):  # pinned to the real archive
        movielens("1m", opener=offline)
    assert sorted(p.name for p in cache.iterdir()) == ["ml-1m.zip"]

    spec = movielens_loader._VERSIONS["1m"]
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    local = dataclasses.replace(spec.archive, sha256=digest)
    monkeypatch.setitem(movielens_loader._VERSIONS, "1m", dataclasses.replace(spec, archive=local))
    assert movielens("1m", opener=offline).num_ratings == 30


def test_the_cli_loads_the_papers_graph_of_rated_movies(ml1m):
    from galfast.experiments import load_dataset

    root, _ = ml1m
    assert load_dataset("movielens-1m", str(root)).num_movies == len(RATED_1M)
    keep = (("unrated_movies", "keep"),)
    assert load_dataset("movielens-1m", str(root), keep).num_movies == len(MOVIES_1M)
