"""Synthetic generators: reproducibility and that every knob does what it says."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from galfast.datasets import (
    DATASET_NAMES,
    GraphDataset,
    RatingDataset,
    edge_homophily,
    load,
    synthetic,
    synthetic_graph,
    synthetic_movielens,
)

sklearn_linear = pytest.importorskip("sklearn.linear_model")
sklearn_metrics = pytest.importorskip("sklearn.metrics")
scipy_stats = pytest.importorskip("scipy.stats")


# A check that a target is NOT recoverable rejects when a p-value under "independent of the
# features" falls below this: a correct generator fails it with probability 1e-6.
NULL_ALPHA = 1e-6


def _held_out(features, target, metric):
    """Fits a logistic regression on 70% of the rows; returns the held-out targets and the
    model's predictions (metric "accuracy") or positive-class scores (metric "auc")."""
    cut = int(0.7 * len(target))
    model = sklearn_linear.LogisticRegression(C=0.1, max_iter=500)
    model.fit(features[:cut], target[:cut])
    if metric == "auc":
        return target[cut:], model.predict_proba(features[cut:])[:, 1]
    return target[cut:], model.predict(features[cut:])


def _held_out_score(features, target, metric):
    """The held-out accuracy or ROC AUC of _held_out's model."""
    truth, out = _held_out(features, target, metric)
    if metric == "auc":
        return sklearn_metrics.roc_auc_score(truth, out)
    return sklearn_metrics.accuracy_score(truth, out)


# ------------------------------------------------------------------ node/link graph
def test_graph_is_reproducible_and_seed_dependent():
    a, b, c = (synthetic_graph(300, seed=s) for s in (5, 5, 6))
    assert torch.equal(a.x, b.x) and torch.equal(a.graph.col, b.graph.col)
    assert torch.equal(a.link_split.test_neg, b.link_split.test_neg)
    assert not torch.equal(a.x, c.x)


def test_graph_dataset_shape():
    ds = synthetic_graph(400, num_classes=3, num_attribute_classes=4, num_features=8, seed=0)
    assert isinstance(ds, GraphDataset) and ds.name == "synthetic-graph"
    assert ds.x.shape == (400, 8) and ds.x.dtype == torch.float32
    assert ds.num_classes == 3 and len(ds.attribute_classes["sensitive"]) == 4
    assert torch.equal(ds.attribute_nodes, torch.arange(400))
    masks = ds.train_mask.int() + ds.val_mask.int() + ds.test_mask.int()
    assert bool((masks == 1).all()) and int(ds.train_mask.sum()) == 240
    assert 7.0 < ds.graph.num_edges / 400 <= 8.0  # avg_degree, less dropped repeats
    src, dst = ds.graph.edge_index()
    assert not bool((src == dst).any())


@pytest.mark.parametrize(
    "attribute_homophily, task_homophily", [(0.1, 0.9), (0.5, 0.5), (0.9, 0.2)]
)
def test_measured_homophily_matches_request(attribute_homophily, task_homophily):
    ds = synthetic_graph(
        2000,
        attribute_task_correlation=0.0,
        attribute_homophily=attribute_homophily,
        task_homophily=task_homophily,
        seed=2,
    )
    edges = ds.graph.edge_index()
    assert edge_homophily(edges, ds.attributes["sensitive"]) == pytest.approx(
        attribute_homophily, abs=0.03
    )
    assert edge_homophily(edges, ds.y) == pytest.approx(task_homophily, abs=0.03)


@pytest.mark.parametrize("rho, agreement", [(0.0, 0.5), (0.6, 0.8), (1.0, 1.0)])
def test_attribute_task_correlation(rho, agreement):
    ds = synthetic_graph(4000, attribute_task_correlation=rho, seed=3)
    same = (ds.attributes["sensitive"] == ds.y).double().mean().item()
    assert same == pytest.approx(agreement, abs=0.03)  # rho + (1 - rho) / 2


def test_attribute_is_recoverable_from_features_only_when_planted():
    def attribute(strength, num_nodes):
        ds = synthetic_graph(
            num_nodes, attribute_task_correlation=0.0, attribute_feature_strength=strength, seed=4
        )
        return ds.x.numpy(), ds.attributes["sensitive"].numpy()

    assert _held_out_score(*attribute(3.0, 2000), "accuracy") > 0.85  # 0.97 measured
    # Unplanted, a balanced binary attribute independent of the features: whatever the model
    # predicts, its correct count on the 6,000 held-out nodes is Binomial(6000, 1/2) exactly.
    # The exact two-sided test at NULL_ALPHA accepts accuracies within about 0.5 +- 0.032
    # (seeds 0 to 4 measured 0.491 to 0.503); a leak at strength 0.3 scores 0.58 to 0.60.
    truth, predicted = _held_out(*attribute(0.0, 20_000), "accuracy")
    correct = int((truth == predicted).sum())
    p = scipy_stats.binomtest(correct, truth.size, 0.5).pvalue
    assert p > NULL_ALPHA, (correct / truth.size, p)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(num_nodes=1), "num_nodes"),
        (dict(num_attribute_classes=1), "num_attribute_classes must be >= 2, got 1"),
        (dict(attribute_homophily=1.5), "attribute_homophily must lie in"),
        (dict(attribute_task_correlation=-0.1), "attribute_task_correlation"),
        (dict(attribute_feature_strength=-1.0), "attribute_feature_strength must be >= 0"),
    ],
)
def test_graph_rejects_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        synthetic_graph(**{"num_nodes": 100, **kwargs})


def test_edge_homophily_definition():
    edges = torch.tensor([[0, 1, 2], [1, 2, 0]])
    assert edge_homophily(edges, torch.tensor([0, 0, 1])) == pytest.approx(1 / 3)
    assert np.isnan(edge_homophily(torch.zeros(2, 0, dtype=torch.long), torch.tensor([0])))
    with pytest.raises(ValueError, match=r"\[2, E\]"):
        edge_homophily(torch.zeros(3, 1, dtype=torch.long), torch.tensor([0]))


# ------------------------------------------------------------------ MovieLens-like ratings
def test_default_size_is_movielens_1m():
    ds = synthetic_movielens(seed=0)
    assert (ds.num_users, ds.num_movies, ds.num_ratings) == (6040, 3706, 1_000_209)
    keys = ds.ratings[:, 0] * ds.num_nodes + ds.ratings[:, 1]
    assert keys.unique().numel() == ds.num_ratings  # every (user, movie) at most once
    stars = torch.bincount(ds.ratings[:, 2], minlength=6)[1:].double() / ds.num_ratings
    ml1m = torch.tensor([56174, 107557, 261197, 348971, 226310], dtype=torch.float64) / 1_000_209
    assert torch.allclose(stars, ml1m, atol=0.002)
    women = ds.attributes["gender"].double().mean().item()
    assert women == pytest.approx(4331 / 6040, abs=0.03)  # share of code 1 = "M"
    assert ds.test_idx.numel() == 100_020 and ds.graph.num_edges == 2 * 900_189


def _profiles(ds):
    """Each user's rating vector (rated indicator and centred stars per movie)."""
    users, movies, stars = ds.ratings.t().numpy()
    movies = movies - ds.num_users
    rated = np.zeros((ds.num_users, ds.num_movies))
    centred = np.zeros((ds.num_users, ds.num_movies))
    rated[users, movies] = 1
    centred[users, movies] = stars - 3.0
    return np.hstack([rated, centred])


@pytest.mark.parametrize(
    "attribute_strength, selection_strength", [(2.0, 0.0), (0.0, 2.0), (2.0, 2.0)]
)
def test_gender_is_inferable_from_ratings_when_planted(attribute_strength, selection_strength):
    ds = synthetic_movielens(
        800,
        200,
        24_000,
        attribute_strength=attribute_strength,
        selection_strength=selection_strength,
        seed=1,
    )
    assert _held_out_score(_profiles(ds), ds.attributes["gender"].numpy(), "auc") > 0.8


def test_gender_is_not_inferable_without_planting():
    # Unplanted, gender is independent of the profiles, so the held-out scores are independent
    # of the held-out genders: AUC = U / (n1 n0) with U the Mann-Whitney statistic under its
    # null. On 2,400 held-out users the two-sided test at NULL_ALPHA accepts AUCs within about
    # 0.5 +- 0.064 (seeds 0 to 2 measured 0.486 to 0.510; the planted cases above score > 0.8).
    ds = synthetic_movielens(
        8000, 200, 240_000, attribute_strength=0.0, selection_strength=0.0, seed=1
    )
    truth, scores = _held_out(_profiles(ds), ds.attributes["gender"].numpy(), "auc")
    test = scipy_stats.mannwhitneyu(scores[truth == 1], scores[truth == 0])
    auc = test.statistic / ((truth == 1).sum() * (truth == 0).sum())
    assert test.pvalue > NULL_ALPHA, (auc, test.pvalue)


def test_popularity_exponent_skews_movie_counts():
    def top_decile_share(exponent):
        ds = synthetic_movielens(500, 1000, 20_000, popularity_exponent=exponent, seed=2)
        counts = torch.bincount(ds.ratings[:, 1] - 500, minlength=1000).sort(descending=True)
        return counts.values[:100].sum().item() / 20_000

    assert top_decile_share(1.0) > 2 * top_decile_share(0.0)


def test_ratings_are_reproducible():
    a, b = (synthetic_movielens(200, 100, 3000, seed=9) for _ in range(2))
    c = synthetic_movielens(200, 100, 3000, seed=10)
    assert torch.equal(a.ratings, b.ratings) and torch.equal(a.test_idx, b.test_idx)
    assert not torch.equal(a.ratings, c.ratings)
    assert isinstance(a, RatingDataset) and a.movie_titles is None


def test_ratings_reject_bad_settings():
    with pytest.raises(ValueError, match="half of all"):
        synthetic_movielens(10, 10, 51)
    with pytest.raises(ValueError, match=">= 0"):
        synthetic_movielens(10, 10, 20, attribute_strength=-1.0)
    assert synthetic_movielens(10, 10, 0).num_ratings == 0


# ------------------------------------------------------------------ by name
def test_load_and_synthetic_dispatch(tmp_path, monkeypatch):
    monkeypatch.setenv("GALFAST_DATA", str(tmp_path))
    assert set(DATASET_NAMES) >= {"movielens-1m", "cora", "synthetic-movielens"}
    assert load("cora").num_nodes == 2708
    small = load("synthetic-movielens", seed=3, num_users=50, num_movies=40, num_ratings=300)
    assert torch.equal(small.ratings, synthetic_movielens(50, 40, 300, seed=3).ratings)
    assert synthetic("graph", num_nodes=50).num_nodes == 50
    with pytest.raises(ValueError, match="takes no root"):
        load("synthetic-graph", root=tmp_path)
    with pytest.raises(ValueError, match="unknown dataset 'imdb'"):
        load("imdb")
    with pytest.raises(ValueError, match="unknown synthetic kind"):
        synthetic("molecules")


@pytest.mark.parametrize(
    "make, argument",
    [
        (lambda v: synthetic_graph(50, avg_degree=v), "avg_degree"),
        (lambda v: synthetic_graph(50, task_feature_strength=v), "task_feature_strength"),
        (lambda v: synthetic_movielens(10, 10, 20, attribute_strength=v), "attribute_strength"),
        (lambda v: synthetic_movielens(10, 10, 20, popularity_exponent=v), "popularity_exponent"),
    ],
)
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_generators_refuse_non_finite_floats(make, argument, value):
    # NaN passed the `< 0` checks and gave a dataset of NaN ratings / features
    with pytest.raises(ValueError, match=f"{argument} must be a finite number"):
        make(value)


@pytest.mark.parametrize(
    "make",
    [lambda s: synthetic_graph(50, seed=s), lambda s: synthetic_movielens(10, 10, 20, seed=s)],
)
@pytest.mark.parametrize(
    "seed, message",
    [
        (-1, "seed must be >= 0, got -1"),
        (1.5, "seed must be an int, got float"),
        (True, "seed must be an int, got bool"),  # not seed 1
        (torch.tensor(1.0), "seed must be an int, got Tensor"),
    ],
)
def test_generators_name_a_bad_seed(make, seed, message):
    with pytest.raises(ValueError, match=message):
        make(seed)
