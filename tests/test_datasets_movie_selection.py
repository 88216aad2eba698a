"""The stand-in's movie selection: a partial sort with the full sort's result, ties included."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from galfast.datasets.synthetic_movielens_1m import (
    _by_user_then_movie,
    _select_movies,
    _smallest_first,
)

# The module (galfast.datasets exports its function under the same name).
generator = importlib.import_module("galfast.datasets.synthetic_movielens_1m")


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


def _case(seed=5, num_users=1300, num_movies=200):
    data = np.random.default_rng(seed)
    logits = data.normal(size=(num_users, num_movies))
    per_user = data.integers(1, num_movies + 1, size=num_users)
    return (lambda r: logits[r]), per_user, num_movies


def _generator(kind: str) -> np.random.Generator:
    bits = {"pcg64": np.random.PCG64, "mt19937": np.random.MT19937}[kind](11)
    rng = np.random.Generator(bits)
    rng.integers(10, size=3)  # leaves half of a 64-bit draw buffered (PCG64's has_uint32)
    return rng


def _assert_same_state(a: np.random.Generator, b: np.random.Generator) -> None:
    sa, sb = a.bit_generator.state, b.bit_generator.state
    assert sa.keys() == sb.keys()
    for key in sa:
        inner_a, inner_b = sa[key], sb[key]
        if isinstance(inner_a, dict):  # MT19937's key is an array
            for name in inner_a:
                np.testing.assert_array_equal(inner_a[name], inner_b[name])
        else:
            assert inner_a == inner_b, key


@pytest.mark.parametrize("kind", ["pcg64", "mt19937"])
@pytest.mark.parametrize("threads", [1, 3])
def test_selection_leaves_the_generator_where_one_thread_does(monkeypatch, kind, threads):
    # Blocks drawn on pool threads from copies of the stream moved ahead (PCG64), or on one
    # thread (any other generator): the same movies, and the generator ends in the same state,
    # its buffered 32-bit half included, so the draws after the selection are the same too.
    logits_of, per_user, num_movies = _case()
    monkeypatch.setattr(generator, "_THREADS", threads)
    ours = _generator(kind)
    got = _select_movies(ours, logits_of, per_user, num_movies)
    theirs = _generator(kind)
    want = _full_sort_selection(theirs, logits_of, per_user, num_movies)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    _assert_same_state(ours, theirs)
    np.testing.assert_array_equal(ours.integers(2**40, size=5), theirs.integers(2**40, size=5))


def test_a_block_that_drew_again_sends_every_block_back_to_one_thread(monkeypatch):
    # NumPy's Gumbel draws again on a double of exactly 0 (once in 2^53), shifting the stream
    # for every later block: the parallel result is dropped and the blocks drawn in order.
    logits_of, per_user, num_movies = _case()
    checked = []

    def one_block_drew_again(state, expected):
        checked.append(state["state"] == expected["state"])
        return len(checked) != 2

    monkeypatch.setattr(generator, "_consumed_exactly", one_block_drew_again)
    ours = _generator("pcg64")
    drawn_from = []
    select_block = generator._select_block

    def spy(rng, *args):
        drawn_from.append(rng is ours)
        return select_block(rng, *args)

    monkeypatch.setattr(generator, "_select_block", spy)
    got = _select_movies(ours, logits_of, per_user, num_movies)
    assert len(checked) == 3 and all(checked)  # three blocks, each really exact
    assert drawn_from == [False] * 3 + [True] * 3  # on copies, then again from the generator
    theirs = _generator("pcg64")
    want = _full_sort_selection(theirs, logits_of, per_user, num_movies)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    _assert_same_state(ours, theirs)


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
