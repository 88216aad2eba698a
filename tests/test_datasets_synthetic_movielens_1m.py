"""synthetic-movielens-1m: ML-1M's published statistics, exact where the generator sets them,
within stated tolerances where they come out of random draws; reproducible by seed."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from galfast.datasets import load, synthetic_movielens_1m
from galfast.datasets.synthetic_movielens_1m import ML1M_STATISTICS


@pytest.fixture(scope="module")
def ml1m():
    return synthetic_movielens_1m(seed=0)


def _counts(ds):
    users, movies, _ = ds.ratings.t().numpy()
    per_user = np.bincount(users, minlength=ds.num_users)
    per_movie = np.bincount(movies - ds.num_users, minlength=ds.num_movies)
    return per_user, per_movie


def test_sizes_and_distinct_ratings_are_ml1m(ml1m):
    assert (ml1m.num_users, ml1m.num_movies, ml1m.num_ratings) == (6040, 3706, 1_000_209)
    keys = ml1m.ratings[:, 0] * ml1m.num_nodes + ml1m.ratings[:, 1]
    assert keys.unique().numel() == ml1m.num_ratings
    _, per_movie = _counts(ml1m)
    assert per_movie.min() >= 1  # 3,706 *rated* movies, as ML-1M counts them
    assert ml1m.test_idx.numel() == 100_020


def test_star_counts_are_exact(ml1m):
    stars = torch.bincount(ml1m.ratings[:, 2], minlength=6)[1:].tolist()
    assert stars == list(ML1M_STATISTICS["rating_counts"])
    assert stars == [56174, 107557, 261197, 348971, 226310]  # 5.6 / 10.8 / 26.1 / 34.9 / 22.6 %


def test_attribute_marginals_are_exact(ml1m):
    for name, key in (("gender", "gender_counts"), ("age", "age_counts")):
        counts = torch.bincount(ml1m.attributes[name], minlength=len(ML1M_STATISTICS[key]))
        assert counts.tolist() == list(ML1M_STATISTICS[key])
    occupation = torch.bincount(ml1m.attributes["occupation"], minlength=21)
    assert occupation.tolist() == list(ML1M_STATISTICS["occupation_counts"])
    women = int((ml1m.attributes["gender"] == 0).sum())
    assert women == 1709 and round(100 * women / 6040, 1) == 28.3


def test_activity_is_ml1m_shaped(ml1m):
    per_user, per_movie = _counts(ml1m)
    women = ml1m.attributes["gender"].numpy() == 0
    assert per_user[women].sum() == 246_440  # ML-1M's ratings by women: exact
    assert per_user.min() >= 20 and per_user.max() <= 2314  # exact bounds
    # Heavy tails, approximately ML-1M's (median user 96, mean 165.6, max 2,314; median
    # movie 123.5, max 3,428): tolerances a seed does not cross.
    assert 80 <= np.median(per_user) <= 112
    assert per_user.max() >= 1500
    assert 90 <= np.median(per_movie) <= 170
    assert 2500 <= per_movie.max() <= 4500
    assert per_movie.max() > 20 * np.median(per_movie)


def test_same_seed_same_data_other_seed_other_data(ml1m):
    again = load("synthetic-movielens-1m", seed=0)
    assert torch.equal(again.ratings, ml1m.ratings) and torch.equal(again.test_idx, ml1m.test_idx)
    for name in ("gender", "age", "occupation"):
        assert torch.equal(again.attributes[name], ml1m.attributes[name])
    other = synthetic_movielens_1m(seed=1)
    assert not torch.equal(other.ratings, ml1m.ratings)
    assert torch.bincount(other.ratings[:, 2])[1:].tolist() == list(
        ML1M_STATISTICS["rating_counts"]
    )


@pytest.mark.parametrize(
    "argument", ["gender_strength", "age_strength", "occupation_strength", "rating_noise"]
)
def test_bad_settings_are_named(argument):
    with pytest.raises(ValueError, match=f"{argument} must be >= 0, got -0.5"):
        synthetic_movielens_1m(**{argument: -0.5})
    with pytest.raises(ValueError, match=f"{argument} must be a finite number"):
        synthetic_movielens_1m(**{argument: float("nan")})
