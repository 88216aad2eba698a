"""The dataset's own files, which no output of a command may replace: ``run --root D --out
D/ind.cora.graph`` wrote its results over a raw file it had just read, and the next load of
the dataset failed on it (or, in the download cache, on its checksum)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from galfast.cli.files import check_not_an_input
from galfast.datasets.planetoid_loader import PLANETOID_NAMES, planetoid_files
from galfast.experiments import ExperimentConfig

__all__ = ["check_spares_the_dataset"]


def dataset_files(cfg: ExperimentConfig) -> tuple[Path, ...]:
    """The files ``cfg``'s dataset is read from, where its loader says which (Planetoid's);
    call it once the dataset has loaded, so that ``cfg.root`` holds a copy."""
    if cfg.dataset in PLANETOID_NAMES:
        return planetoid_files(cfg.dataset, cfg.root)
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
