"""Seeded synthetic graphs with the sizes and degree skew of the benchmark datasets.

Each function returns ``(edge_index, num_nodes)`` with ``edge_index`` int64 ``[2, E]`` holding
both directions of every undirected edge (as GNN code sees Planetoid and MovieLens).
"""

from __future__ import annotations

import numpy as np
import torch


def _power_law_graph(num_nodes: int, num_undirected: int, seed: int) -> tuple[torch.Tensor, int]:
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, num_nodes + 1) ** 0.6
    weights /= weights.sum()
    draws = int(num_undirected * 1.3)
    src = rng.choice(num_nodes, draws, p=weights)
    dst = rng.integers(0, num_nodes, draws)
    keep = src != dst
    a, b = np.minimum(src[keep], dst[keep]), np.maximum(src[keep], dst[keep])
    pairs = rng.permutation(np.unique(a.astype(np.int64) * num_nodes + b))[:num_undirected]
    a, b = pairs // num_nodes, pairs % num_nodes
    return torch.from_numpy(np.stack([np.concatenate([a, b]), np.concatenate([b, a])])), num_nodes


def cora_like(seed: int = 0) -> tuple[torch.Tensor, int]:
    """2,708 nodes, about 10.5k directed edges (Cora: 5,278 undirected)."""
    return _power_law_graph(2708, 5278, seed)


def pubmed_like(seed: int = 0) -> tuple[torch.Tensor, int]:
    """19,717 nodes, about 88.6k directed edges (PubMed: 44,324 undirected)."""
    return _power_law_graph(19717, 44324, seed)


def movielens_like(
    num_users: int = 6040, num_movies: int = 3706, num_ratings: int = 1_000_209, seed: int = 0
) -> tuple[torch.Tensor, int]:
    """A MovieLens-1M-size bipartite user-movie graph: users 0..U-1, movies U..U+M-1, every
    rating stored in both directions (about 2.0M directed edges). Movie popularity is Zipf-like
    (the top movie has ~3k ratings, many have a handful), user activity is heavy-tailed with at
    least 20 ratings per user, as in ML-1M."""
    rng = np.random.default_rng(seed)
    popularity = 1.0 / (np.arange(1, num_movies + 1) + 60.0) ** 1.1
    popularity /= popularity.sum()
    activity = 20 + rng.pareto(1.3, num_users)
    activity = activity / activity.sum()
    draws = int(num_ratings * 1.6)
    users = rng.choice(num_users, draws, p=activity)
    movies = rng.choice(num_movies, draws, p=popularity)
    keys = np.unique(users.astype(np.int64) * num_movies + movies)
    keys = rng.permutation(keys)[:num_ratings]
    users, movies = keys // num_movies, keys % num_movies + num_users
    edge_index = np.stack([np.concatenate([users, movies]), np.concatenate([movies, users])])
    return torch.from_numpy(edge_index), num_users + num_movies
