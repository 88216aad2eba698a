"""The result type of user-item rating datasets (MovieLens, synthetic MovieLens-like), and its
builder shared by the real and the synthetic loaders."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch
from torch import Tensor

from galfast._args import check_fraction
from galfast._dtypes import holds_integers
from galfast.datasets._common import attribute_summary, check_attributes, to_device
from galfast.datasets.rating_graph import rating_graph
from galfast.graph import Graph

__all__ = ["NUM_RATING_LEVELS", "RatingDataset", "build_rating_dataset"]

NUM_RATING_LEVELS = 5


@dataclass(frozen=True, eq=False, repr=False)
class RatingDataset:
    """A bipartite user-movie rating graph with user attributes and a rating split.

    Node ids: users ``0 .. U-1``, movies ``U .. U+M-1``.

    Attributes:
        name: e.g. ``"movielens-1m"``.
        graph: message-passing graph over the *training* ratings only (a held-out rating never
            reaches the encoder): each rating ``user -> movie`` and ``movie -> user``, with
            ``edge_type = rating - 1`` in ``0 .. 4``.
        num_users, num_movies: ``U`` and ``M``.
        ratings: ``[R, 3]`` int64 triples ``(user node, movie node, rating 1..5)``.
        train_idx, test_idx: int64 row indices into ``ratings``, disjoint, sorted.
        attributes: user attributes ``name -> [U]`` int64 codes (entry ``u`` is user node ``u``).
        attribute_classes: ``name -> class names``; ``len`` is the cardinality.
        attribute_nodes: ``[U]`` int64 ids of the nodes with attributes: ``arange(U)``.
        raw_user_ids, raw_movie_ids: ``[U]`` / ``[M]`` the ids used in the source files.
        movie_titles: ``M`` titles, or ``None`` for synthetic data.
        license: licence / attribution notice of the data.
        notes: caveats a user must know.

    Example:
        >>> ds = galfast.datasets.movielens("1m", root="~/data")
        >>> users, movies, rating = ds.train_ratings.unbind(1)
        >>> z = encoder(ds.graph)                     # [U + M, d]
        >>> leak = attacker(z[ds.attribute_nodes], ds.attributes["gender"])
    """

    name: str
    graph: Graph
    num_users: int
    num_movies: int
    ratings: Tensor
    train_idx: Tensor
    test_idx: Tensor
    attributes: dict[str, Tensor]
    attribute_classes: dict[str, tuple[str, ...]]
    attribute_nodes: Tensor
    raw_user_ids: Tensor
    raw_movie_ids: Tensor
    movie_titles: Optional[tuple[str, ...]]
    license: str
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.graph.num_nodes != self.num_users + self.num_movies:
            raise ValueError("graph must have num_users + num_movies nodes")
        if self.ratings.dim() != 2 or self.ratings.size(1) != 3:
            raise ValueError(f"ratings must have shape [R, 3], got {list(self.ratings.shape)}")
        if self.raw_user_ids.shape != (self.num_users,):
            raise ValueError(f"raw_user_ids must have shape [{self.num_users}]")
        if self.raw_movie_ids.shape != (self.num_movies,):
            raise ValueError(f"raw_movie_ids must have shape [{self.num_movies}]")
        if self.movie_titles is not None and len(self.movie_titles) != self.num_movies:
            raise ValueError(f"movie_titles must hold {self.num_movies} titles")
        check_attributes(
            self.attributes, self.attribute_classes, self.attribute_nodes, self.num_users
        )
        if self.ratings.device.type != "meta":  # a meta copy (shapes only) has no values
            _check_rating_values(self)
            _check_split(self.train_idx, self.test_idx, self.num_ratings)

    @property
    def num_nodes(self) -> int:
        return self.num_users + self.num_movies

    @property
    def num_ratings(self) -> int:
        return self.ratings.size(0)

    @property
    def num_rating_levels(self) -> int:
        """Ratings are ``1 .. num_rating_levels`` (edge types ``0 .. num_rating_levels - 1``)."""
        return NUM_RATING_LEVELS

    @property
    def train_ratings(self) -> Tensor:
        """``[R_train, 3]`` training triples."""
        return self.ratings[self.train_idx]

    @property
    def test_ratings(self) -> Tensor:
        """``[R_test, 3]`` held-out triples."""
        return self.ratings[self.test_idx]

    def to(self, device: Any) -> RatingDataset:
        """A copy with every tensor and the graph on `device`."""
        return to_device(self, device)

    def __repr__(self) -> str:
        return (
            f"RatingDataset({self.name}: {self.num_users} users, {self.num_movies} movies, "
            f"{self.num_ratings} ratings ({self.train_idx.numel()} train / "
            f"{self.test_idx.numel()} test), attributes: "
            f"{attribute_summary(self.attribute_classes)})"
        )


def split_ratings(num_ratings: int, test_fraction: float, seed: int) -> tuple[Tensor, Tensor]:
    """Seeded random split of rating rows: ``int(test_fraction * R)`` test rows, the rest train,
    both sorted."""
    test_fraction = check_fraction("test_fraction", test_fraction)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5A7E]))
    perm = rng.permutation(num_ratings)
    num_test = int(test_fraction * num_ratings)
    return torch.from_numpy(np.sort(perm[num_test:])), torch.from_numpy(np.sort(perm[:num_test]))


def build_rating_dataset(
    *,
    name: str,
    user_index: np.ndarray,
    movie_index: np.ndarray,
    rating: np.ndarray,
    num_users: int,
    num_movies: int,
    attributes: dict[str, np.ndarray],
    attribute_classes: dict[str, tuple[str, ...]],
    raw_user_ids: np.ndarray,
    raw_movie_ids: np.ndarray,
    movie_titles: Optional[tuple[str, ...]],
    license: str,
    notes: tuple[str, ...],
    seed: int,
    test_fraction: float,
) -> RatingDataset:
    """Assembles a :class:`RatingDataset` from 0-based user / movie indices per rating.

    Raises ValueError when a rating is not a whole star in ``1..5``, an index is out of range
    or the three arrays differ in length.
    """
    user_index = _integer_column(name, "user_index", user_index)
    movie_index = _integer_column(name, "movie_index", movie_index)
    rating = _star_column(name, rating)
    if not user_index.size == movie_index.size == rating.size:
        raise ValueError(
            f"{name}: user_index, movie_index and rating hold {user_index.size}, "
            f"{movie_index.size} and {rating.size} entries: one each per rating"
        )
    if rating.size and not (rating.min() >= 1 and rating.max() <= NUM_RATING_LEVELS):
        bad = rating[(rating < 1) | (rating > NUM_RATING_LEVELS)][0]
        raise ValueError(f"{name}: rating {bad} is outside 1..{NUM_RATING_LEVELS}")
    for label, index, bound in (
        ("user", user_index, num_users),
        ("movie", movie_index, num_movies),
    ):
        if index.size and not (index.min() >= 0 and index.max() < bound):
            raise ValueError(f"{name}: a {label} index lies outside [0, {bound})")
    ratings = torch.from_numpy(np.stack([user_index, movie_index + num_users, rating], axis=1))
    train_idx, test_idx = split_ratings(len(rating), test_fraction, seed)
    train = ratings[train_idx]
    graph = rating_graph(train[:, :2], train[:, 2] - 1, num_users, num_movies)
    return RatingDataset(
        name=name,
        graph=graph,
        num_users=num_users,
        num_movies=num_movies,
        ratings=ratings,
        train_idx=train_idx,
        test_idx=test_idx,
        attributes={
            key: torch.as_tensor(codes, dtype=torch.int64) for key, codes in attributes.items()
        },
        attribute_classes=attribute_classes,
        attribute_nodes=torch.arange(num_users),
        raw_user_ids=torch.as_tensor(raw_user_ids, dtype=torch.int64),
        raw_movie_ids=torch.as_tensor(raw_movie_ids, dtype=torch.int64),
        movie_titles=movie_titles,
        license=license,
        notes=notes,
    )


def _check_rating_values(dataset: RatingDataset) -> None:
    """Users, movies and stars where the dataset says they are: the setups read a user or a
    star out of range as another node or level, without an error."""
    ratings, users = dataset.ratings, dataset.num_users
    if not holds_integers(ratings):
        raise ValueError(f"ratings must hold integers, got {ratings.dtype}")
    if not ratings.numel():
        return
    for column, (low, high), what in (
        (0, (0, users), "user nodes"),
        (1, (users, users + dataset.num_movies), "movie nodes"),
        (2, (1, NUM_RATING_LEVELS + 1), "stars"),
    ):
        values = ratings[:, column]
        if bool(((values < low) | (values >= high)).any()):
            raise ValueError(f"ratings column {column} must hold {what} in [{low}, {high})")


def _check_split(train_idx: Tensor, test_idx: Tensor, num_ratings: int) -> None:
    """Row indices into the ratings, and no row in both splits: a test rating also trained
    on (and in the message-passing graph) would make the test RMSE a training RMSE."""
    for name, index in (("train_idx", train_idx), ("test_idx", test_idx)):
        if index.dim() != 1 or not holds_integers(index):
            raise ValueError(f"{name} must be a 1-D tensor of row indices, got {index.dtype}")
        if index.numel() and bool(((index < 0) | (index >= num_ratings)).any()):
            raise ValueError(f"{name} holds a row outside [0, {num_ratings})")
    if bool(torch.isin(test_idx, train_idx).any()):
        raise ValueError("train_idx and test_idx share ratings: a split's rows must be disjoint")


def _integer_column(name: str, label: str, values: Any) -> np.ndarray:
    """``values`` as a 1-D int64 array, refused unless it holds integers: a narrow type
    (uint8) wrapped around when the movie indices were offset by the user count, so a movie
    became a user node."""
    array = np.asarray(values)
    if array.ndim != 1 or not (array.size == 0 or np.issubdtype(array.dtype, np.integer)):
        raise ValueError(
            f"{name}: {label} must be a 1-D array of integers, got {array.dtype} of "
            f"shape {list(array.shape)}"
        )
    return array.astype(np.int64)


def _star_column(name: str, rating: Any) -> np.ndarray:
    """The ratings as int64 stars; a float rating must be a whole number (4.5 was cut to 4)."""
    array = np.asarray(rating)
    if array.ndim == 1 and array.dtype.kind == "f":
        bad = array[~(np.isfinite(array) & (array == np.floor(array)))]
        if bad.size:
            raise ValueError(
                f"{name}: rating {bad[0]} is not a whole number of stars 1..{NUM_RATING_LEVELS}"
            )
        return array.astype(np.int64)
    return _integer_column(name, "rating", array)
