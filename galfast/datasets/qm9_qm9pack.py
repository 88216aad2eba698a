"""QM9 offline from the PyPI package ``qm9pack`` (MIT): its CSVs hold the original QM9 XYZ
files' atoms, positions, SMILES and properties for the 130,831 characterised molecules, in
QM9's order. Bonds are perceived with RDKit (:mod:`galfast.datasets.qm9_bonds`).

The package's ``__init__`` imports ``pkg_resources`` (gone from recent setuptools), so its data
folder is located without importing it.
"""

from __future__ import annotations

import csv
import importlib.util
import multiprocessing
import os
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from itertools import islice
from pathlib import Path
from typing import Optional

import numpy as np

from galfast.datasets.qm9_bonds import perceive_bonds
from galfast.datasets.qm9_features import RawMolecules, check_molecules
from galfast.datasets.qm9_targets import targets_from_xyz_properties

__all__ = [
    "QM9PACK_FILES",
    "QM9PACK_MOLECULES",
    "qm9pack_folder",
    "read_qm9pack",
    "rdkit_available",
]

QM9PACK_FILES = ("qm9_part1.csv", "qm9_part2.csv", "qm9_part3.csv")
QM9PACK_MOLECULES = 130_831  # every part read whole
_SYMBOLS = {"H": 1, "C": 6, "N": 7, "O": 8, "F": 9}
_INDEX, _SMILES, _ELEMENTS, _XYZ = 1, 2, 6, 7
_PROPERTIES = slice(10, 25)  # RotA..Heatcapacity: A, B, C, mu, alpha, ..., cv
_CHUNK = 2048


def qm9pack_folder() -> Optional[Path]:
    """The installed qm9pack's data folder, or None when the package is not installed."""
    spec = importlib.util.find_spec("qm9pack")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "data"
    return folder if all((folder / name).is_file() for name in QM9PACK_FILES) else None


def rdkit_available() -> bool:
    return importlib.util.find_spec("rdkit") is not None


def _rows(folder: Path, limit: Optional[int]):
    """qm9pack's data rows, each as ``(where: file and line, row)``."""
    # A row's coordinate and frequency lists are long. The limit is process-wide: it is put back
    # after the read, so other csv readers (the canonical one) keep their guard.
    before = csv.field_size_limit(1 << 30)
    try:
        yield from _rows_within_limit(folder, limit)
    finally:
        csv.field_size_limit(before)


def _rows_within_limit(folder: Path, limit: Optional[int]):
    count = 0
    for name in QM9PACK_FILES:
        path = folder / name
        with open(path, newline="", encoding="utf-8") as stream:
            reader = csv.reader(stream)
            try:
                if next(reader, None) is None:
                    raise ValueError(f"{path}: empty, expected qm9pack's header line")
                for row in islice(reader, None if limit is None else limit - count):
                    count += 1
                    yield f"{path}, line {reader.line_num}", row
            except (UnicodeDecodeError, csv.Error) as error:
                raise ValueError(f"{path}: not qm9pack's CSV ({error})") from None
        if limit is not None and count >= limit:
            return


def _parse(row: list[str]) -> tuple[np.ndarray, np.ndarray]:
    if len(row) < _PROPERTIES.stop:
        raise ValueError(f"{len(row)} fields, expected at least {_PROPERTIES.stop}")
    elements = [e.strip() for e in row[_ELEMENTS].strip("[]").replace("'", "").split(",")]
    if elements == [""]:
        raise ValueError(f"qm9pack molecule {row[_INDEX]} has no atoms")
    unknown = sorted(set(elements) - set(_SYMBOLS))
    if unknown:
        raise ValueError(f"qm9pack molecule {row[_INDEX]}: unexpected elements {unknown}")
    numbers = np.asarray([_SYMBOLS[e] for e in elements], dtype=np.int64)
    # Some QM9 files write tiny numbers in Mathematica's form, e.g. 8.4813*^-6.
    text = row[_XYZ].replace("*^", "e").replace("[", "").replace("]", "")
    positions = np.asarray(text.split(","), dtype=np.float64)
    if positions.size != 3 * numbers.size or not np.isfinite(positions).all():
        raise ValueError(f"qm9pack molecule {row[_INDEX]}: {numbers.size} atoms, bad XYZ")
    return numbers, positions.reshape(-1, 3)


def _perceive_chunk(chunk: list[tuple[np.ndarray, np.ndarray, str]]) -> list[tuple]:
    from rdkit import RDLogger

    RDLogger.DisableLog("rdApp.*")
    return [perceive_bonds(numbers, positions, smiles) for numbers, positions, smiles in chunk]


def _perceive_all(molecules: list[tuple], workers: int) -> list[tuple]:
    chunks = [molecules[i : i + _CHUNK] for i in range(0, len(molecules), _CHUNK)]
    # fork: the workers need no re-import of the caller's script (spawn would re-run an
    # unguarded one); they only run RDKit. Elsewhere the work stays in this process.
    if workers <= 1 or len(chunks) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [result for chunk in chunks for result in _perceive_chunk(chunk)]
    context = multiprocessing.get_context("fork")
    # fork starts every worker at once: no more of them than there is work for.
    with ProcessPoolExecutor(min(workers, len(chunks)), mp_context=context) as pool:
        return [result for part in pool.map(_perceive_chunk, chunks) for result in part]


def read_qm9pack(
    folder: Path, limit: Optional[int] = None, workers: Optional[int] = None
) -> tuple[RawMolecules, Counter]:
    """The molecules of qm9pack's CSVs in `folder` (the first `limit` only, if given), with
    bonds perceived by RDKit in `workers` processes (default: all CPUs). Returns them and a
    count of how their bond orders were found (:mod:`~galfast.datasets.qm9_bonds`'s
    ``ORDER_*`` codes)."""
    ids, smiles, properties, parsed = [], [], [], []
    for where, row in _rows(folder, limit):
        try:
            numbers, positions = _parse(row)
            values = np.asarray(row[_PROPERTIES], dtype=np.float64)
            index = int(row[_INDEX])
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        ids.append(index)
        smiles.append(row[_SMILES])
        properties.append(values)
        parsed.append((numbers, positions))
    workers = (os.cpu_count() or 1) if workers is None else workers
    perceived = _perceive_all(
        [(numbers, positions, s) for (numbers, positions), s in zip(parsed, smiles)], workers
    )
    atom_counts = [numbers.size for numbers, _ in parsed]
    bond_counts = [bonds.shape[0] for bonds, _, _ in perceived]
    atom_ptr = np.concatenate([[0], np.cumsum(atom_counts)]).astype(np.int64)
    numbers = np.concatenate([n for n, _ in parsed]) if parsed else np.zeros(0, np.int64)
    positions = np.concatenate([p for _, p in parsed]) if parsed else np.zeros((0, 3))
    molecules = RawMolecules(
        atomic_numbers=numbers,
        positions=positions.astype(np.float32),
        atom_ptr=atom_ptr,
        bonds=np.concatenate([b for b, _, _ in perceived]).reshape(-1, 2),
        bond_types=np.concatenate([t for _, t, _ in perceived]),
        bond_ptr=np.concatenate([[0], np.cumsum(bond_counts)]).astype(np.int64),
        targets=targets_from_xyz_properties(
            np.asarray(properties, dtype=np.float64).reshape(-1, 15), numbers, atom_ptr
        ),
        ids=np.asarray(ids, dtype=np.int64),
    )
    try:
        check_molecules(molecules)  # what the row checks leave: NaN targets, repeated ids
    except ValueError as error:
        raise ValueError(f"{folder}: {error}") from None
    return molecules, Counter(how for _, _, how in perceived)
