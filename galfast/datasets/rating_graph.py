"""The message-passing graph of a rating dataset: each rating ``user -> movie`` and
``movie -> user``, with ``edge_type = rating - 1``.

``Graph.from_edge_index(..., symmetrize=True)`` finds the CSR order by sorting and merging a
packed key per edge (MovieLens-1M: two ``torch.unique`` over 1.8M keys, about 1 s of a run's
start). The loaders give distinct (user, movie) pairs sorted by user, then movie; for such
pairs the order is known: the users' rows list their movies in the given order, and the
movies' rows list their users in the order of one stable sort of the pairs by movie (a radix
sort of small integers). The result is the same Graph, tensor for tensor.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from galfast.graph import Graph

__all__ = ["rating_graph"]


def rating_graph(pairs: Tensor, levels: Tensor, num_users: int, num_movies: int) -> Graph:
    """The symmetrised rating graph of ``pairs`` ``[R, 2]`` (user node, movie node ``U + m``)
    with edge types ``levels`` ``[R]``; ``Graph.from_edge_index`` of the same edges when the
    pairs are not distinct and sorted."""
    users, movies = pairs[:, 0], pairs[:, 1]
    num_nodes = num_users + num_movies
    if not _distinct_and_sorted(users, movies, num_users, num_nodes):
        return Graph.from_edge_index(
            pairs.t().contiguous(), num_nodes, edge_type=levels, symmetrize=True
        )
    # Movies' rows: their raters in user order (the pairs are sorted by user, the sort is
    # stable). Movie ids are offset by num_users, so subtracting it keeps them small.
    by_movie = torch.from_numpy(_stable_order((movies - num_users).numpy()))
    col = torch.cat([movies, users.index_select(0, by_movie)])
    edge_type = torch.cat([levels, levels.index_select(0, by_movie)])
    rows = torch.cat([users, movies])
    rowptr = torch.zeros(num_nodes + 1, dtype=torch.int64)
    rowptr[1:] = torch.cumsum(torch.bincount(rows, minlength=num_nodes), 0)
    return Graph(rowptr, col, num_nodes, edge_type=edge_type)


def _distinct_and_sorted(users: Tensor, movies: Tensor, num_users: int, num_nodes: int) -> bool:
    """Users in ``[0, U)``, movies in ``[U, N)``, the pairs strictly increasing by (user,
    movie) (so no pair repeats), on the CPU."""
    if users.device.type != "cpu" or users.numel() == 0:
        return False
    if not (int(users.min()) >= 0 and int(users.max()) < num_users):
        return False
    if not (int(movies.min()) >= num_users and int(movies.max()) < num_nodes):
        return False
    key = users * num_nodes + movies
    return bool((key[1:] > key[:-1]).all())


def _stable_order(values: np.ndarray) -> np.ndarray:
    """The stable argsort of non-negative integers, as int64; through int16 when they fit,
    where NumPy's stable sort is a radix sort."""
    small = values.astype(np.int16) if values.max() < 2**15 else values
    return np.argsort(small, kind="stable").astype(np.int64)
