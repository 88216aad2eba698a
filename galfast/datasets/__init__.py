"""Datasets for GAL: MovieLens, Planetoid (Cora bundled) and seeded synthetic graphs.

Every loader returns a :class:`GraphDataset` (node features, labels, node and link splits) or a
:class:`RatingDataset` (user-movie ratings and their split); both carry the graph to run the
encoder on and the sensitive attributes with the ids of the nodes that have them.
"""

from galfast.datasets.download import (
    ChecksumError,
    DatasetNotFoundError,
    UnpinnedChecksumWarning,
    data_dir,
)
from galfast.datasets.graph_dataset import GraphDataset
from galfast.datasets.homophily import edge_homophily
from galfast.datasets.link_split import LinkSplit, random_link_split, sample_negative_edges
from galfast.datasets.movielens_loader import movielens
from galfast.datasets.planetoid_loader import MissingFeaturesWarning, planetoid
from galfast.datasets.rating_dataset import RatingDataset
from galfast.datasets.registry import DATASET_NAMES, load, synthetic
from galfast.datasets.synthetic_graph import synthetic_graph
from galfast.datasets.synthetic_movielens import synthetic_movielens
from galfast.datasets.synthetic_movielens_1m import synthetic_movielens_1m

__all__ = [
    "DATASET_NAMES",
    "ChecksumError",
    "DatasetNotFoundError",
    "GraphDataset",
    "LinkSplit",
    "MissingFeaturesWarning",
    "RatingDataset",
    "UnpinnedChecksumWarning",
    "data_dir",
    "edge_homophily",
    "load",
    "movielens",
    "planetoid",
    "random_link_split",
    "sample_negative_edges",
    "synthetic",
    "synthetic_graph",
    "synthetic_movielens",
    "synthetic_movielens_1m",
]
