"""The processed-QM9 cache: the parsed molecules (atoms, positions, bonds, targets) in one
``.npz`` whose name and contents carry a format version, written atomically. Features are
rebuilt from it on load (a second), so changing them needs no reprocessing."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional

import numpy as np

from galfast.datasets.qm9_features import RawMolecules

__all__ = ["CACHE_VERSION", "cache_path", "load_cache", "save_cache"]

# Bump when the parsing or the bond perception changes: older caches are then ignored.
CACHE_VERSION = 1


def cache_path(folder: Path, source: str) -> Path:
    return folder / f"qm9_{source}_v{CACHE_VERSION}.npz"


def save_cache(path: Path, molecules: RawMolecules, notes: tuple[str, ...]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".npz")
    os.close(handle)
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
    """The cached molecules and notes, or None when `path` is absent or of another version."""
    if not path.is_file():
        return None
    with np.load(path) as stored:
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
        return molecules, tuple(str(note) for note in stored["notes"])
