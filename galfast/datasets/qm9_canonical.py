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
from galfast.datasets.qm9_features import RawMolecules, check_molecules
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
# gdb9.sdf.csv's columns: the molecule's title, then the 19 values targets_from_moleculenet takes.
_CSV_HEADER = (
    "mol_id", "A", "B", "C", "mu", "alpha", "homo", "lumo", "gap", "r2", "zpve", "u0", "u298",
    "h298", "g298", "cv", "u0_atom", "u298_atom", "h298_atom", "g298_atom",
)  # fmt: skip


def _read_text(path: Path) -> str:
    """The text of `path`; ValueError naming it when it is not UTF-8 (a binary or damaged
    copy), rather than a UnicodeDecodeError that names no file."""
    try:
        with open(path, encoding="utf-8") as stream:
            return stream.read()
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not a text file (byte {error.start} is not UTF-8)") from None


def _lines(path: Path) -> list[str]:
    """The lines of `path` without the blank lines that end it."""
    lines = _read_text(path).splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def _counts(record: list[str]) -> tuple[int, int]:
    """The atom and bond counts of an SDF `record` (its lines up to ``$$$$``), checked against
    the lines it holds: a truncated or edited record must not take its neighbour's lines."""
    if len(record) < 5:
        raise ValueError("too short to hold a header and a counts line")
    num_atoms, num_bonds = int(record[3][0:3]), int(record[3][3:6])
    if num_atoms < 1 or num_bonds < 0 or 4 + num_atoms + num_bonds > len(record) - 1:
        raise ValueError(
            f"its counts line gives {num_atoms} atoms and {num_bonds} bonds; "
            f"it holds {len(record) - 5} lines for them"
        )
    return num_atoms, num_bonds


def _atom(line: str) -> tuple[int, tuple[float, float, float]]:
    fields = line.split()
    if len(fields) < 4:
        raise ValueError(f"atom line {line!r} lacks x, y, z and an element")
    x, y, z, symbol = fields[:4]
    if symbol not in _SYMBOLS:
        raise ValueError(f"unexpected element {symbol!r}")
    return _SYMBOLS[symbol], (float(x), float(y), float(z))


def _bond(line: str, num_atoms: int) -> tuple[int, int, int]:
    """A bond's 0-based atoms and type."""
    first, second, kind = int(line[0:3]), int(line[3:6]), int(line[6:9])
    if kind not in _SDF_BOND_TYPES:
        raise ValueError(f"unsupported SDF bond type {kind}")
    if not (1 <= first <= num_atoms and 1 <= second <= num_atoms) or first == second:
        raise ValueError(f"a bond between atoms {first} and {second} of {num_atoms}")
    return first - 1, second - 1, _SDF_BOND_TYPES[kind]


def read_sdf(path: Path) -> tuple[RawMolecules, int]:
    """Every record of a V2000 SDF file: atoms, positions and bonds (targets and ids left
    empty). Returns the molecules and their count. ValueError names the file, record and line
    of anything malformed."""
    molecules, titles = _read_sdf(path)
    return molecules, len(titles)


def _read_sdf(path: Path) -> tuple[RawMolecules, list[str]]:
    """:func:`read_sdf`, with the records' titles (their first lines) instead of their count."""
    titles = []
    numbers, positions, atom_counts = [], [], []
    bonds, bond_types, bond_counts = [], [], []
    lines = _lines(path)
    at = 0
    while at < len(lines):
        end = at
        while end < len(lines) and lines[end].strip() != "$$$$":
            end += 1
        if end == len(lines):
            raise ValueError(f"{path}: the SDF record at line {at + 1} has no closing $$$$ line")
        record = lines[at : end + 1]
        try:
            num_atoms, num_bonds = _counts(record)
            for line in record[4 : 4 + num_atoms]:
                number, position = _atom(line)
                numbers.append(number)
                positions.append(position)
            for line in record[4 + num_atoms : 4 + num_atoms + num_bonds]:
                first, second, kind = _bond(line, num_atoms)
                bonds.append((first, second))
                bond_types.append(kind)
        except ValueError as error:
            raise ValueError(
                f"{path}: SDF record {len(atom_counts) + 1} (line {at + 1}): {error}"
            ) from None
        titles.append(record[0].strip())
        atom_counts.append(num_atoms)
        bond_counts.append(num_bonds)
        at = end + 1
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
    try:
        check_molecules(molecules)  # what the line checks leave: NaN or huge positions
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    return molecules, titles


def read_skip_list(path: Path) -> np.ndarray:
    """0-based indices of the uncharacterised molecules, read as PyG reads the file (the
    lines between a 9-line header and a 1-line footer, first column 1-based)."""
    lines = _lines(path)
    if len(lines) < 10:
        raise ValueError(f"{path}: {len(lines)} lines, too few for the 9-line header and footer")
    indices = []
    for number, line in enumerate(lines[9:-1], start=10):
        first = (line.split() or [""])[0]
        if not first.isdecimal() or int(first) < 1:
            raise ValueError(f"{path}: line {number} does not start with a molecule number")
        indices.append(int(first) - 1)
    return np.asarray(indices, dtype=np.int64)


def _read_targets(path: Path, titles: list[str]) -> np.ndarray:
    """The targets of the SDF's molecules, titled `titles`: one row each, in the same order
    (a row missing, repeated or moved would shift every target after it)."""
    try:
        header, *rows = list(csv.reader(_read_text(path).splitlines())) or [[]]
    except csv.Error as error:  # e.g. a field longer than csv allows: not this file
        raise ValueError(f"{path}: not MoleculeNet's CSV ({error})") from None
    # The values are read by position: columns in another order would be other targets.
    if header[: len(_CSV_HEADER)] != list(_CSV_HEADER):
        raise ValueError(
            f"{path}: line 1 should be MoleculeNet's header {','.join(_CSV_HEADER)!r}, "
            f"got {','.join(header)[:80]!r}"
        )
    if len(rows) != len(titles):
        raise ValueError(f"{path}: {len(rows)} rows, but gdb9.sdf holds {len(titles)} molecules")
    values = []
    for line, (row, title) in enumerate(zip(rows, titles), start=2):
        if len(row) < 20 or row[0] != title:
            raise ValueError(
                f"{path}: line {line} should be {title} (as in gdb9.sdf) and its 19 values, "
                f"got {','.join(row)[:80]!r}"
            )
        try:
            values.append([float(value) for value in row[1:20]])
        except ValueError as error:
            raise ValueError(f"{path}: line {line}: {error}") from None
    with np.errstate(over="ignore"):  # too large for float32: refused below as infinite
        targets = targets_from_moleculenet(np.asarray(values, dtype=np.float32).reshape(-1, 19))
    finite = np.isfinite(targets).all(1)
    if not finite.all():
        line = int(np.argmin(finite)) + 2
        raise ValueError(f"{path}: line {line} holds NaN, infinite or too large values")
    return targets


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
    molecules, titles = _read_sdf(folder / "gdb9.sdf")
    targets = _read_targets(folder / "gdb9.sdf.csv", titles)
    count = len(titles)
    skip_list = folder / "uncharacterized.txt"
    skip = read_skip_list(skip_list)
    if skip.size and skip.max() >= count:
        raise ValueError(
            f"{skip_list}: lists molecule {skip.max() + 1}, but gdb9.sdf holds {count} molecules"
        )
    keep = np.setdiff1d(np.arange(count), skip)
    if keep.size == 0:
        raise ValueError(f"{folder}: no molecule is left once uncharacterized.txt's are dropped")
    return _select(molecules._replace(targets=targets), keep)
