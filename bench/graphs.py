"""Seeded synthetic graphs with the size and degree skew of the paper's datasets, for benchmarks.

Each function returns ``(edge_index, num_nodes)``: ``edge_index`` is an int64 ``[2, E]``
tensor holding every undirected edge in both directions (as PyG's datasets do), without self
loops or duplicates. Generation is numpy-vectorised (well under a second each).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = ["cora_like", "pubmed_like", "movielens_like"]


def _undirected(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> Tensor:
    """Both directions of the distinct non-loop pairs {src, dst}, sorted."""
    keep = src != dst
    lo, hi = np.minimum(src[keep], dst[keep]), np.maximum(src[keep], dst[keep])
    pairs = np.unique(lo * num_nodes + hi)  # sorted, distinct
    lo, hi = pairs // num_nodes, pairs % num_nodes
    return torch.from_numpy(np.stack([np.concatenate([lo, hi]), np.concatenate([hi, lo])]))


def _chung_lu(num_nodes: int, num_edges: int, max_degree: int, seed: int) -> tuple[Tensor, int]:
    """About `num_edges` undirected edges whose endpoints are drawn with power-law weights
    (degree tail ~ k^-2.6, capped near `max_degree`), like a citation graph. Every node
    gets at least one edge (each node is the first endpoint of one draw)."""
    rng = np.random.default_rng(seed)
    weight = (1.0 - rng.random(num_nodes)) ** (-1.0 / 1.6)
    weight = np.minimum(weight, max_degree * weight.sum() / (2 * num_edges))
    prob = weight / weight.sum()
    extra = int(num_edges * 1.01) - num_nodes  # a few draws are lost to loops and repeats
    src = np.concatenate([np.arange(num_nodes), rng.choice(num_nodes, size=extra, p=prob)])
    dst = rng.choice(num_nodes, size=src.size, p=prob)
    return _undirected(src, dst, num_nodes), num_nodes


def cora_like(seed: int = 0) -> tuple[Tensor, int]:
    """Cora's size: 2,708 nodes, ~5,300 undirected edges (~10,600 directed), max degree ~170."""
    return _chung_lu(2708, 5278, 168, seed)


def pubmed_like(seed: int = 0) -> tuple[Tensor, int]:
    """PubMed's size: 19,717 nodes, ~44,300 undirected edges (~88,600 directed), max degree
    ~170."""
    return _chung_lu(19717, 44324, 171, seed)


def movielens_like(seed: int = 0) -> tuple[Tensor, int]:
    """MovieLens-1M's shape: a bipartite user-movie rating graph with 6,040 users (ids
    0..6039) and 3,706 movies (ids 6040..9745), ~1.0M ratings stored in both directions
    (~2.0M directed edges). Every user rates at least 20 movies, user activity is log-normal
    (mean ~165) and movie popularity Zipf-skewed (the top movie is rated by about half of the
    users, many movies by a handful)."""
    num_users, num_movies, num_ratings = 6040, 3706, 1_000_209
    rng = np.random.default_rng(seed)
    activity = 20 + rng.lognormal(mean=4.3, sigma=1.0, size=num_users)
    activity *= num_ratings * 1.25 / activity.sum()  # repeats below remove ~1/5 of the draws
    per_user = np.minimum(activity.astype(np.int64), num_movies)
    popularity = 1.0 / (np.arange(num_movies) + 120.0) ** 1.5
    popularity = popularity[rng.permutation(num_movies)]
    user = np.repeat(np.arange(num_users), per_user)
    movie = rng.choice(num_movies, size=user.size, p=popularity / popularity.sum())
    rated = np.zeros(num_users * num_movies, dtype=bool)  # dedupe by marking (faster than a sort)
    rated[user * num_movies + movie] = True
    pairs = np.flatnonzero(rated)
    user, movie = pairs // num_movies, pairs % num_movies + num_users
    edge_index = np.stack([np.concatenate([user, movie]), np.concatenate([movie, user])])
    return torch.from_numpy(edge_index), num_users + num_movies
