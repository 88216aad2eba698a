"""rating_graph: the symmetrised rating graph, equal to Graph.from_edge_index's."""

from __future__ import annotations

import pytest
import torch

from galfast.datasets.rating_graph import rating_graph
from galfast.graph import Graph


def _reference(pairs, levels, num_nodes) -> Graph:
    return Graph.from_edge_index(
        pairs.t().contiguous(), num_nodes, edge_type=levels, symmetrize=True
    )


def _assert_same_graph(graph: Graph, ref: Graph) -> None:
    assert graph.num_nodes == ref.num_nodes
    assert torch.equal(graph.rowptr, ref.rowptr)
    assert torch.equal(graph.col, ref.col)
    assert torch.equal(graph.edge_type, ref.edge_type)


def _pairs(num_users, num_movies, count, seed, *, sort=True, distinct=True):
    gen = torch.Generator().manual_seed(seed)
    users = torch.randint(0, num_users, (count,), generator=gen)
    movies = torch.randint(0, num_movies, (count,), generator=gen)
    key = users * num_movies + movies
    if distinct:
        key = key.unique()  # sorted
    elif sort:
        key = key.sort().values
    if not sort:
        key = key[torch.randperm(key.numel(), generator=gen)]
    pairs = torch.stack([key // num_movies, key % num_movies + num_users], 1)
    levels = torch.randint(0, 5, (pairs.size(0),), generator=gen)
    return pairs, levels


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("sizes", [(7, 5, 20), (50, 40, 600), (3, 300, 500), (1, 1, 1)])
def test_sorted_distinct_pairs_give_the_reference_graph(seed, sizes):
    num_users, num_movies, count = sizes
    pairs, levels = _pairs(num_users, num_movies, count, seed)
    graph = rating_graph(pairs, levels, num_users, num_movies)
    _assert_same_graph(graph, _reference(pairs, levels, num_users + num_movies))


def test_a_movie_with_many_raters_keeps_them_in_user_order():
    # One hub movie rated by every user, users and movies without ratings around it.
    num_users, num_movies = 40_000, 3
    users = torch.arange(1, num_users, 2)
    pairs = torch.stack([users, torch.full_like(users, num_users + 1)], 1)
    levels = torch.arange(users.numel()) % 5
    graph = rating_graph(pairs, levels, num_users, num_movies)
    _assert_same_graph(graph, _reference(pairs, levels, num_users + num_movies))


@pytest.mark.parametrize("case", ["unsorted", "duplicates", "empty"])
def test_other_pairs_fall_back_to_the_general_build(case):
    if case == "empty":
        pairs, levels = torch.zeros(0, 2, dtype=torch.int64), torch.zeros(0, dtype=torch.int64)
    else:
        pairs, levels = _pairs(6, 4, 40, 1, sort=case == "duplicates", distinct=False)
        if case == "duplicates":
            assert pairs.unique(dim=0).size(0) < pairs.size(0)
    graph = rating_graph(pairs, levels, 6, 4)
    _assert_same_graph(graph, _reference(pairs, levels, 10))


def test_the_synthetic_stand_in_is_built_by_the_fast_path(monkeypatch):
    # The loaders' pairs are distinct and sorted: no general build (which sorts all edges).
    from galfast.datasets import synthetic_movielens

    def refuse(*args, **kwargs):
        raise AssertionError("Graph.from_edge_index was called")

    monkeypatch.setattr(Graph, "from_edge_index", refuse)
    ds = synthetic_movielens(num_users=60, num_movies=30, num_ratings=500, seed=3)
    monkeypatch.undo()
    train = ds.train_ratings
    ref = _reference(train[:, :2], train[:, 2] - 1, ds.num_users + ds.num_movies)
    _assert_same_graph(ds.graph, ref)
