"""Datasets for GAL: MovieLens, Planetoid (Cora bundled) and seeded synthetic graphs.
QM9's molecules come as a :class:`MoleculeDataset` (graph-level targets and attributes).

Every loader returns a :class:`GraphDataset` (node features, labels, node and link splits) or a
:class:`RatingDataset` (user-movie ratings and their split); both carry the graph to run the
encoder on and the sensitive attributes with the ids of the nodes that have them.
The knowledge graphs FB15k-237 and WN18RR load as a :class:`KnowledgeGraphDataset` (triples,
vocabularies, entity attributes).
"""

from galfast.datasets.complete_graph import complete_graph, with_distance
from galfast.datasets.download import (
    ChecksumError,
    DatasetNotFoundError,
    UnpinnedChecksumWarning,
    data_dir,
)
from galfast.datasets.graph_dataset import GraphDataset
from galfast.datasets.homophily import edge_homophily
from galfast.datasets.knowledge_graph import KG_NAMES, fb15k_237, wn18rr
from galfast.datasets.knowledge_graph_dataset import KnowledgeGraphDataset
from galfast.datasets.link_split import LinkSplit, random_link_split, sample_negative_edges
from galfast.datasets.molecule_batch import MoleculeBatch
from galfast.datasets.molecule_dataset import MoleculeDataset
from galfast.datasets.molecule_split import paper_split, target_statistics
from galfast.datasets.movielens_loader import movielens
from galfast.datasets.planetoid_loader import MissingFeaturesWarning, planetoid
from galfast.datasets.qm9_loader import QM9_SOURCES, qm9
from galfast.datasets.qm9_targets import QM9_TARGETS, QM9_UNITS
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
    "KG_NAMES",
    "KnowledgeGraphDataset",
    "LinkSplit",
    "MissingFeaturesWarning",
    "MoleculeBatch",
    "MoleculeDataset",
    "QM9_SOURCES",
    "QM9_TARGETS",
    "QM9_UNITS",
    "RatingDataset",
    "UnpinnedChecksumWarning",
    "complete_graph",
    "data_dir",
    "edge_homophily",
    "fb15k_237",
    "load",
    "movielens",
    "paper_split",
    "planetoid",
    "qm9",
    "random_link_split",
    "sample_negative_edges",
    "synthetic",
    "synthetic_graph",
    "synthetic_movielens",
    "synthetic_movielens_1m",
    "target_statistics",
    "with_distance",
    "wn18rr",
]
