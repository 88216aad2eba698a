"""The dataset result types: validation on construction, device moves, summaries."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from galfast.datasets import GraphDataset, RatingDataset, synthetic_graph, synthetic_movielens


@pytest.fixture(scope="module")
def graph_ds() -> GraphDataset:
    return synthetic_graph(60, seed=0)


@pytest.fixture(scope="module")
def rating_ds() -> RatingDataset:
    return synthetic_movielens(30, 20, 120, seed=0)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: dict(x=d.x[:-1]), r"x must have shape \[60, F\]"),
        (lambda d: dict(y=d.y[:-1]), r"y must have shape \[60\]"),
        (lambda d: dict(test_mask=d.test_mask[:5]), "test_mask"),
        (lambda d: dict(attribute_nodes=d.attribute_nodes + 1), r"attribute_nodes must lie in"),
        (
            lambda d: dict(attributes={"sensitive": d.attributes["sensitive"] + 2}),
            r"codes outside \[0, 2\)",
        ),
        (lambda d: dict(attributes={"other": d.y}), "must name the same attributes"),
        (
            lambda d: dict(attributes={"sensitive": d.attributes["sensitive"].int()}),
            "must be int64",
        ),
    ],
)
def test_graph_dataset_rejects_inconsistent_fields(graph_ds, change, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(graph_ds, **change(graph_ds))


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: dict(num_movies=d.num_movies + 1), "num_users \\+ num_movies"),
        (lambda d: dict(ratings=d.ratings[:, :2]), r"\[R, 3\]"),
        (lambda d: dict(raw_movie_ids=d.raw_movie_ids[:3]), "raw_movie_ids"),
        (lambda d: dict(movie_titles=("one",)), "movie_titles must hold 20"),
        (
            lambda d: dict(attributes={**d.attributes, "age": d.attributes["age"] + 7}),
            r"'age' holds codes outside \[0, 7\)",
        ),
    ],
)
def test_rating_dataset_rejects_inconsistent_fields(rating_ds, change, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(rating_ds, **change(rating_ds))


def test_to_moves_every_tensor(graph_ds, rating_ds):
    moved = graph_ds.to("meta")
    tensors = [moved.x, moved.y, moved.train_mask, moved.attribute_nodes, moved.graph.col]
    tensors += [moved.link_split.graph.rowptr, moved.link_split.test_neg]
    tensors += list(moved.attributes.values())
    assert all(t.device.type == "meta" for t in tensors)
    assert graph_ds.x.device.type == "cpu"  # the original is untouched
    moved = rating_ds.to("meta")
    tensors = [moved.ratings, moved.train_idx, moved.graph.edge_type, moved.raw_user_ids]
    assert all(t.device.type == "meta" for t in tensors + list(moved.attributes.values()))


def test_summaries(graph_ds, rating_ds):
    assert repr(graph_ds).startswith("GraphDataset(synthetic-graph: 60 nodes, ")
    assert "sensitive (2)" in repr(graph_ds)
    assert repr(rating_ds) == (
        "RatingDataset(synthetic-movielens: 30 users, 20 movies, 120 ratings (108 train / 12 "
        "test), attributes: gender (2), age (7), occupation (21))"
    )
    assert rating_ds.num_nodes == 50 and rating_ds.num_rating_levels == 5
    assert torch.equal(rating_ds.train_ratings, rating_ds.ratings[rating_ds.train_idx])
