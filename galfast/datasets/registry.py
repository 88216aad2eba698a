"""Datasets by name, for command lines and configs."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Callable, Optional, Union

from galfast._args import check_int
from galfast.datasets.graph_dataset import GraphDataset
from galfast.datasets.knowledge_graph import KG_NAMES, fb15k_237, wn18rr
from galfast.datasets.knowledge_graph_dataset import KnowledgeGraphDataset
from galfast.datasets.molecule_dataset import MoleculeDataset
from galfast.datasets.movielens_loader import movielens
from galfast.datasets.planetoid_loader import PLANETOID_NAMES, planetoid
from galfast.datasets.qm9_loader import qm9
from galfast.datasets.rating_dataset import RatingDataset
from galfast.datasets.synthetic_graph import synthetic_graph
from galfast.datasets.synthetic_movielens import synthetic_movielens
from galfast.datasets.synthetic_movielens_1m import synthetic_movielens_1m

__all__ = ["DATASET_NAMES", "load", "loader_defaults", "loader_options", "synthetic"]
__all__ += ["MOLECULE_NAMES"]

DATASET_NAMES = (
    "movielens-1m",
    "movielens-100k",
    *PLANETOID_NAMES,
    "synthetic-graph",
    "synthetic-movielens",
    "synthetic-movielens-1m",
    *KG_NAMES,
    "qm9",
)

# Datasets of whole molecules (a MoleculeDataset): trained with the MPNN encoder only.
MOLECULE_NAMES = ("qm9",)

_SYNTHETIC = {"graph": synthetic_graph, "movielens": synthetic_movielens}
# The calibrated ML-1M stand-in (fixed size; see docs/results.md).
_SYNTHETIC["movielens-1m"] = synthetic_movielens_1m
_KNOWLEDGE_GRAPHS = {"fb15k-237": fb15k_237, "wn18rr": wn18rr}


def synthetic(kind: str = "graph", **kwargs: Any) -> Union[GraphDataset, RatingDataset]:
    """A seeded synthetic dataset: ``kind="graph"`` -> :func:`synthetic_graph` (node/link task),
    ``kind="movielens"`` -> :func:`synthetic_movielens` (rating task); `kwargs` go to it."""
    if not (isinstance(kind, str) and kind in _SYNTHETIC):  # a list was unhashable
        raise ValueError(f"unknown synthetic kind {kind!r}; expected one of {sorted(_SYNTHETIC)}")
    return _SYNTHETIC[kind](**kwargs)


def _loader(name: str) -> Callable[..., Any]:
    if name.startswith("movielens-"):
        return movielens
    if name in PLANETOID_NAMES:
        return planetoid
    if name in _KNOWLEDGE_GRAPHS:
        return _KNOWLEDGE_GRAPHS[name]
    if name == "qm9":
        return qm9_for_runs
    return _SYNTHETIC[name.removeprefix("synthetic-")]


def qm9_for_runs(
    root: Optional[Union[str, Path]] = None,
    *,
    source: str = "auto",
    download: bool = True,
    workers: Optional[int] = None,
    molecules: Optional[int] = None,
) -> MoleculeDataset:
    """:func:`qm9` by name, with ``molecules``: keep that many, drawn by a seeded shuffle
    (:meth:`MoleculeDataset.subset`), for reduced runs on small machines."""
    if molecules is not None:  # before the load; its upper bound is known after it
        molecules = check_int("molecules", molecules, 1, 2**63)
    dataset = qm9(root, source=source, download=download, workers=workers)
    if molecules is not None and molecules > len(dataset):
        raise ValueError(f"molecules must be at most {len(dataset)} (all of QM9), got {molecules}")
    return dataset if molecules is None else dataset.subset(molecules)


# What load() passes itself: never a loader option.
_FIXED = frozenset({"name", "version", "kind", "root", "seed"})


def loader_options(name: str) -> tuple[str, ...]:
    """The keyword arguments ``load(name, ...)`` passes on to the dataset's loader (sorted)."""
    if not (isinstance(name, str) and name in DATASET_NAMES):  # an array compared elementwise
        raise ValueError(f"name must be one of {DATASET_NAMES}: unknown dataset {name!r}")
    parameters = inspect.signature(_loader(name)).parameters
    return tuple(sorted(set(parameters) - _FIXED))


def loader_defaults(name: str) -> dict[str, Any]:
    """Each of :func:`loader_options` with its default value (``inspect.Parameter.empty``
    for one without)."""
    options = loader_options(name)  # first: it checks the name
    parameters = inspect.signature(_loader(name)).parameters
    return {key: parameters[key].default for key in options}


def load(
    name: str,
    root: Optional[Union[str, Path]] = None,
    seed: int = 0,
    **kwargs: Any,
) -> Union[GraphDataset, RatingDataset, KnowledgeGraphDataset]:
    """Loads a dataset by its name in :data:`DATASET_NAMES`.

    ``movielens-*`` and the synthetic MovieLens give a :class:`RatingDataset`; Planetoid names
    and ``synthetic-graph`` a :class:`GraphDataset`. `root` is for the real datasets only;
    `kwargs` go to the loader (e.g. ``download=False``, ``num_users=...``).
    ``fb15k-237`` and ``wn18rr`` give a :class:`KnowledgeGraphDataset` (fixed splits: `seed`
    changes nothing).
    ``qm9`` gives a :class:`MoleculeDataset` (options ``source``, ``download``, ``workers``,
    ``molecules`` for a seeded subset;
    `seed` changes nothing: the QM9 setup splits it).

    Example:
        >>> load("citeseer", root="../shared/data").num_nodes
        3327
    """
    unknown = sorted(set(kwargs) - set(loader_options(name)))
    seed = check_int("seed", seed, 0)  # the knowledge graphs and QM9 ignore it, but not a bad one
    if unknown:
        raise ValueError(
            f"{name} takes no option {', '.join(map(repr, unknown))}; its options are "
            f"{', '.join(loader_options(name))}"
        )
    if name.startswith("movielens-"):
        return movielens(name.removeprefix("movielens-"), root, seed, **kwargs)
    if name in PLANETOID_NAMES:
        return planetoid(name, root, seed, **kwargs)
    if name in _KNOWLEDGE_GRAPHS:
        return _KNOWLEDGE_GRAPHS[name](root, **kwargs)
    if name == "qm9":
        return qm9_for_runs(root, **kwargs)
    if root is not None:
        raise ValueError(f"{name} is generated, it takes no root")
    return synthetic(name.removeprefix("synthetic-"), seed=seed, **kwargs)
