"""The stand-in's movie selection: a partial sort with the full sort's result, ties included."""

from __future__ import annotations

import numpy as np
import pytest

from galfast.datasets.synthetic_movielens_1m import (
    _by_user_then_movie,
    _select_movies,
    _smallest_first,
)


def _full_sort_selection(rng, logits_of, per_user, num_movies):
    # The selection as first written: one full argsort per block of users.
    users, movies = [], []
    for start in range(0, per_user.size, 512):
        rows = np.arange(start, min(start + 512, per_user.size))
        keys = (logits_of(rows) + rng.gumbel(size=(rows.size, num_movies))).astype(np.float32)
        order = np.argsort(-keys, axis=1)
        taken = np.arange(num_movies)[None, :] < per_user[rows, None]
        users.append(np.repeat(rows, per_user[rows]))
        movies.append(order[taken])
    return np.concatenate(users), np.concatenate(movies)


@pytest.mark.parametrize("scale", [1.0, 1e7, 1e9])
def test_selection_equals_the_full_sort(scale):
    # scale 1e7 / 1e9: float32 keys with many ties (the Gumbel noise rounds away), where the
    # order among equal keys is the full sort's.
    data = np.random.default_rng(4)
    num_users, num_movies = 1100, 300
    logits = scale * np.round(data.normal(size=(num_users, num_movies)), 1)
    per_user = data.integers(1, num_movies + 1, size=num_users)
    per_user[:3] = (num_movies, num_movies - 1, 1)
    got = _select_movies(np.random.default_rng(9), lambda r: logits[r], per_user, num_movies)
    want = _full_sort_selection(np.random.default_rng(9), lambda r: logits[r], per_user, num_movies)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("count", [1, 5, 9, 10])
def test_smallest_first_with_ties_at_the_cut(count):
    values = np.array([3, 1, 2, 2, 0, 2, 5, 1, 4, 2], dtype=np.float32)
    np.testing.assert_array_equal(_smallest_first(values, count), np.argsort(values)[:count])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_user_movie_order_is_lexsorts(seed):
    # Duplicate (user, movie) pairs included: both orders keep a tie's original order.
    data = np.random.default_rng(seed)
    num_movies = 50
    users = data.integers(0, 40, size=3000)
    movies = data.integers(0, num_movies, size=3000)
    got = _by_user_then_movie(users, movies, num_movies)
    assert np.array_equal(got, np.lexsort((movies, users)))
