"""The processed-QM9 cache: the parsed molecules (atoms, positions, bonds, targets) in one
``.npz`` whose name and contents carry a format version, written atomically. Features are
rebuilt from it on load (a second), so changing them needs no reprocessing."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Optional

import numpy as np

from galfast.datasets.download import new_partial
from galfast.datasets.qm9_features import RawMolecules, check_molecules

__all__ = ["CACHE_VERSION", "cache_path", "load_cache", "save_cache"]

# Bump when the parsing or the bond perception changes: older caches are then ignored.
CACHE_VERSION = 1

# What np.load and its archive raise for a file that is no intact cache (truncated, edited, of
# another format): a missing array is a KeyError, a 0-d one read as an array a TypeError.
_DAMAGED = (ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile)


def cache_path(folder: Path, source: str) -> Path:
    return folder / f"qm9_{source}_v{CACHE_VERSION}.npz"


def save_cache(path: Path, molecules: RawMolecules, notes: tuple[str, ...]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = new_partial(path, ".npz")  # np.savez adds .npz to a name without it
    try:
        np.savez(
            partial,
            version=np.int64(CACHE_VERSION),
            notes=np.asarray(notes, dtype=str),
            atomic_numbers=molecules.atomic_numbers.astype(np.int8),
            positions=molecules.positions.astype(np.float32),
            atom_ptr=molecules.atom_ptr,
            bonds=molecules.bonds.astype(np.int16),
            bond_types=molecules.bond_types.astype(np.int8),
            bond_ptr=molecules.bond_ptr,
            targets=molecules.targets.astype(np.float32),
            ids=molecules.ids,
        )
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


def load_cache(path: Path) -> Optional[tuple[RawMolecules, tuple[str, ...]]]:
    """The cached molecules and notes, or None when `path` is absent or of another version;
    ValueError naming `path` when it is damaged (it is not rebuilt silently: the raw data may
    be gone, and a cache edited by hand may be meant)."""
    if not path.exists():
        return None  # a folder in its place is not absent: open() names it
    try:
        # Opened here: np.load leaves its own handle open when the archive is unreadable.
        with open(path, "rb") as stream, np.load(stream) as stored:
            if int(stored["version"]) != CACHE_VERSION:
                return None
            molecules = RawMolecules(
                atomic_numbers=stored["atomic_numbers"].astype(np.int64),
                positions=stored["positions"],
                atom_ptr=stored["atom_ptr"],
                bonds=stored["bonds"].astype(np.int64),
                bond_types=stored["bond_types"].astype(np.int64),
                bond_ptr=stored["bond_ptr"],
                targets=stored["targets"],
                ids=stored["ids"],
            )
            notes = tuple(str(note) for note in stored["notes"])
        check_molecules(molecules)
    except _DAMAGED as error:
        raise ValueError(
            f"{path}: damaged QM9 cache ({error}); delete it to rebuild it from the raw data"
        ) from None
    return molecules, notes
