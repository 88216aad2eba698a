"""The dataset's own files, which no output of a command may replace: ``run --root D --out
D/ind.cora.graph`` wrote its results over a raw file it had just read, and the next load of
the dataset failed on it (or, in the download cache, on its checksum)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from galfast.cli.files import check_not_an_input
from galfast.datasets.knowledge_graph import KG_NAMES, knowledge_graph_files
from galfast.datasets.movielens_loader import movielens_files
from galfast.datasets.planetoid_loader import PLANETOID_NAMES, planetoid_files
from galfast.datasets.qm9_loader import qm9_files
from galfast.experiments import ExperimentConfig

__all__ = ["check_spares_the_dataset", "dataset_files"]


def dataset_files(cfg: ExperimentConfig) -> tuple[Path, ...]:
    """The files ``cfg``'s dataset is read from (and its loader writes: a download, a
    processed cache), as its loader lists them; none for a generated dataset. Call it once
    the dataset has loaded, so that ``cfg.root`` holds a copy."""
    if cfg.dataset in PLANETOID_NAMES:
        return planetoid_files(cfg.dataset, cfg.root)
    if cfg.dataset.startswith("movielens-"):
        return movielens_files(cfg.dataset.removeprefix("movielens-"), cfg.root)
    if cfg.dataset in KG_NAMES:
        return knowledge_graph_files(cfg.dataset, cfg.root)
    if cfg.dataset == "qm9":
        return qm9_files(cfg.root)
    return ()


def check_spares_the_dataset(
    outputs: Iterable[os.PathLike], option: str, cfg: ExperimentConfig
) -> None:
    """Refuses (UsageError naming ``option``) an output that is one of the dataset's files,
    by any spelling, symlink or hard link."""
    files = dataset_files(cfg)
    for path in outputs:
        for file in files:
            check_not_an_input(path, option, {"the dataset's file": file})
