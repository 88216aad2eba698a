"""QM9 from the canonical release PyG's ``QM9`` downloads: MoleculeNet's ``gdb9.sdf`` (atoms,
3-D positions and bonds, perceived from the geometry when MoleculeNet built the file),
``gdb9.sdf.csv`` (targets) and ``uncharacterized.txt`` (the 3,054 molecules QM9's authors
flag as failing their consistency check; PyG drops them, leaving 130,831).

The SDF is read with a small V2000 parser, no RDKit: PyG reads it with RDKit and
``sanitize=False``, which keeps the file's atoms, order and bond types as written.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from galfast.datasets.download import Resource
from galfast.datasets.qm9_features import RawMolecules
from galfast.datasets.qm9_targets import targets_from_moleculenet

__all__ = ["RAW_FILES", "RESOURCES", "read_canonical", "read_sdf", "read_skip_list"]

# No SHA-256 is published for either file and this was written offline: fetch() pins each
# file's hash on its first download (UnpinnedChecksumWarning) and checks it afterwards.
RESOURCES = (
    Resource(
        "https://deepchemdata.s3-us-west-1.amazonaws.com/datasets/molnet_publish/qm9.zip",
        "qm9.zip",
    ),
    Resource("https://ndownloader.figshare.com/files/3195404", "uncharacterized.txt"),
)
RAW_FILES = ("gdb9.sdf", "gdb9.sdf.csv", "uncharacterized.txt")
_SYMBOLS = {"H": 1, "C": 6, "N": 7, "O": 8, "F": 9}
_SDF_BOND_TYPES = {1: 0, 2: 1, 3: 2, 4: 3}  # V2000 single, double, triple, aromatic


def _record_end(lines: list[str], at: int) -> int:
    """The index of the ``$$$$`` line that ends the record around line `at`."""
    while at < len(lines) and lines[at].strip() != "$$$$":
        at += 1
    if at == len(lines):
        raise ValueError(f"an SDF record has no closing $$$$ line (after line {at})")
    return at


def read_sdf(path: Path) -> tuple[RawMolecules, int]:
    """Every record of a V2000 SDF file: atoms, positions and bonds (targets and ids left
    empty). Returns the molecules and their count."""
    numbers, positions, atom_counts = [], [], []
    bonds, bond_types, bond_counts = [], [], []
    with open(path) as stream:
        lines = stream.read().split("\n")
    at = 0
    while at < len(lines) and lines[at].strip():
        counts = lines[at + 3]
        num_atoms, num_bonds = int(counts[0:3]), int(counts[3:6])
        for line in lines[at + 4 : at + 4 + num_atoms]:
            x, y, z, symbol = line.split()[:4]
            if symbol not in _SYMBOLS:
                raise ValueError(f"{path}: unexpected element {symbol!r} near line {at + 1}")
            numbers.append(_SYMBOLS[symbol])
            positions.append((float(x), float(y), float(z)))
        start = at + 4 + num_atoms
        for line in lines[start : start + num_bonds]:
            kind = int(line[6:9])
            if kind not in _SDF_BOND_TYPES:
                raise ValueError(f"{path}: unsupported SDF bond type {kind} near line {at + 1}")
            bonds.append((int(line[0:3]) - 1, int(line[3:6]) - 1))
            bond_types.append(_SDF_BOND_TYPES[kind])
        atom_counts.append(num_atoms)
        bond_counts.append(num_bonds)
        at = _record_end(lines, start + num_bonds) + 1
    atom_ptr = np.concatenate([[0], np.cumsum(atom_counts)]).astype(np.int64)
    bond_ptr = np.concatenate([[0], np.cumsum(bond_counts)]).astype(np.int64)
    molecules = RawMolecules(
        atomic_numbers=np.asarray(numbers, dtype=np.int64),
        positions=np.asarray(positions, dtype=np.float32).reshape(-1, 3),
        atom_ptr=atom_ptr,
        bonds=np.asarray(bonds, dtype=np.int64).reshape(-1, 2),
        bond_types=np.asarray(bond_types, dtype=np.int64),
        bond_ptr=bond_ptr,
        targets=np.zeros((len(atom_counts), 19), dtype=np.float32),
        ids=np.arange(1, len(atom_counts) + 1, dtype=np.int64),
    )
    return molecules, len(atom_counts)


def read_skip_list(path: Path) -> np.ndarray:
    """0-based indices of the uncharacterised molecules, read as PyG reads the file (the
    lines between a 9-line header and a 1-line footer, first column 1-based)."""
    with open(path) as stream:
        body = stream.read().split("\n")[9:-2]
    return np.asarray([int(line.split()[0]) - 1 for line in body], dtype=np.int64)


def _read_targets(path: Path) -> np.ndarray:
    with open(path, newline="") as stream:
        rows = list(csv.reader(stream))[1:]
    return targets_from_moleculenet(np.asarray([row[1:20] for row in rows], dtype=np.float32))


def _select(molecules: RawMolecules, keep: np.ndarray) -> RawMolecules:
    """The molecules at positions `keep` (ascending)."""

    def rows(ptr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        counts = np.diff(ptr)[keep]
        starts = ptr[:-1][keep]
        owner = np.repeat(np.arange(keep.size), counts)
        within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        index = starts[owner] + within
        return index, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    atoms, atom_ptr = rows(molecules.atom_ptr)
    bonds, bond_ptr = rows(molecules.bond_ptr)
    return RawMolecules(
        molecules.atomic_numbers[atoms],
        molecules.positions[atoms],
        atom_ptr,
        molecules.bonds[bonds],
        molecules.bond_types[bonds],
        bond_ptr,
        molecules.targets[keep],
        molecules.ids[keep],
    )


def read_canonical(folder: Path) -> RawMolecules:
    """The 130,831 characterised molecules of the canonical release in `folder` (which holds
    :data:`RAW_FILES`), in PyG's order and target units."""
    molecules, count = read_sdf(folder / "gdb9.sdf")
    targets = _read_targets(folder / "gdb9.sdf.csv")
    if targets.shape[0] != count:
        raise ValueError(
            f"{folder}: gdb9.sdf holds {count} molecules but gdb9.sdf.csv {targets.shape[0]} rows"
        )
    skip = read_skip_list(folder / "uncharacterized.txt")
    keep = np.setdiff1d(np.arange(count), skip)
    return _select(molecules._replace(targets=targets), keep)
