"""PyG's QM9 node and edge features, computed for all molecules at once from atoms and bonds.

Node features (11 columns, PyG's ``QM9.process``): one-hot atom type H, C, N, O, F; atomic
number; aromatic; sp, sp2, sp3 hybridisation; number of bonded hydrogens. Edge features (4):
one-hot bond type single, double, triple, aromatic, one row per direction of each bond.

PyG reads the canonical SDF with RDKit and ``sanitize=False``; RDKit sets an atom's aromatic
flag and hybridisation only while sanitising, so in PyG's QM9 the aromatic, sp, sp2 and sp3
columns are zero for every atom (PyG issues #2163 and #8370). They are zero here too, which is
what a model trained on PyG's QM9 saw.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "ATOM_TYPES",
    "BOND_TYPES",
    "MoleculeArrays",
    "RawMolecules",
    "check_molecules",
    "pyg_features",
]

ATOM_TYPES = (1, 6, 7, 8, 9)  # H, C, N, O, F: the one-hot order of PyG's QM9
BOND_TYPES = ("single", "double", "triple", "aromatic")
NUM_NODE_FEATURES = 11


class RawMolecules(NamedTuple):
    """Molecules as read from a source, concatenated.

    ``atomic_numbers`` ``[N]`` and ``positions`` ``[N, 3]`` (Angstrom): molecule ``g`` owns
    rows ``atom_ptr[g]:atom_ptr[g+1]``. ``bonds`` ``[B, 2]`` atom indices local to their
    molecule and ``bond_types`` ``[B]`` (0 single, 1 double, 2 triple, 3 aromatic): molecule
    ``g`` owns rows ``bond_ptr[g]:bond_ptr[g+1]``. ``targets`` ``[G, 19]`` in PyG's order and
    units, ``ids`` ``[G]`` the molecules' numbers in QM9 (``gdb_<id>``, 1-based)."""

    atomic_numbers: np.ndarray
    positions: np.ndarray
    atom_ptr: np.ndarray
    bonds: np.ndarray
    bond_types: np.ndarray
    bond_ptr: np.ndarray
    targets: np.ndarray
    ids: np.ndarray


class MoleculeArrays(NamedTuple):
    """Features ready for a :class:`MoleculeDataset`: ``x`` ``[N, 11]``, ``edge_index``
    ``[2, E]`` (local atom indices, sorted by target then source within each molecule),
    ``edge_attr`` ``[E, 4]`` and ``edge_ptr`` ``[G + 1]``."""

    x: np.ndarray
    edge_index: np.ndarray
    edge_attr: np.ndarray
    edge_ptr: np.ndarray


def _molecule_of(ptr: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(ptr.size - 1), np.diff(ptr))


def _check_ptr(name: str, ptr: np.ndarray, molecules: int, rows: int) -> None:
    if ptr.shape != (molecules + 1,) or ptr[0] != 0 or ptr[-1] != rows or (np.diff(ptr) < 0).any():
        raise ValueError(f"{name} must rise from 0 to {rows} in {molecules + 1} entries")


def check_molecules(raw: RawMolecules) -> None:
    """Raises ValueError naming the first inconsistency of `raw`: arrays of mismatched sizes,
    a molecule without atoms, a bond outside its molecule or joining an atom to itself, an
    element or bond type QM9 lacks, a non-finite position or target, an id seen twice. What
    a damaged file or cache gives must fail here, not as wrong molecules later."""
    if raw.ids.ndim != 1 or raw.atomic_numbers.ndim != 1 or raw.bonds.ndim != 2:
        raise ValueError("ids and atomic numbers must be 1-D arrays and bonds 2-D")
    g, n, b = raw.ids.shape[0], raw.atomic_numbers.shape[0], raw.bonds.shape[0]
    _check_ptr("atom_ptr", raw.atom_ptr, g, n)
    _check_ptr("bond_ptr", raw.bond_ptr, g, b)
    if raw.positions.shape != (n, 3) or raw.bonds.shape != (b, 2):
        raise ValueError(f"positions must have shape [{n}, 3] and bonds [{b}, 2]")
    if raw.bond_types.shape != (b,) or raw.targets.shape != (g, 19):
        raise ValueError(f"bond types must have shape [{b}] and targets [{g}, 19]")
    sizes = np.diff(raw.atom_ptr)
    if g and sizes.min() == 0:
        raise ValueError(f"molecule #{int(np.argmin(sizes)) + 1} has no atoms")
    bond_molecule = _molecule_of(raw.bond_ptr)
    outside = ((raw.bonds < 0) | (raw.bonds >= sizes[bond_molecule][:, None])).any(1)
    outside |= raw.bonds[:, 0] == raw.bonds[:, 1]
    if outside.any():
        bond = int(np.argmax(outside))
        first, second = raw.bonds[bond].tolist()
        raise ValueError(
            f"molecule #{int(bond_molecule[bond]) + 1} has a bond between atoms {first} and "
            f"{second} (0-based) of its {int(sizes[bond_molecule[bond]])}"
        )
    unknown = sorted(set(np.unique(raw.atomic_numbers).tolist()) - set(ATOM_TYPES))
    if unknown:
        raise ValueError(f"QM9 holds only H, C, N, O and F; got atomic numbers {unknown}")
    if b and not (0 <= raw.bond_types.min() and raw.bond_types.max() < len(BOND_TYPES)):
        raise ValueError(f"bond types must lie in [0, {len(BOND_TYPES)})")
    for name, values in (("positions", raw.positions), ("targets", raw.targets)):
        if not np.isfinite(values).all():
            molecule = int(np.argmin(np.isfinite(values).all(1)))
            if name == "positions":
                molecule = int(_molecule_of(raw.atom_ptr)[molecule])
            raise ValueError(f"molecule #{molecule + 1} has NaN or infinite {name}")
    ids, counts = np.unique(raw.ids, return_counts=True)
    if (counts > 1).any():
        raise ValueError(f"molecule id {int(ids[np.argmax(counts > 1)])} appears twice")


def pyg_features(raw: RawMolecules) -> MoleculeArrays:
    """PyG's QM9 features of every molecule in ``raw`` (see the module docstring)."""
    z = np.asarray(raw.atomic_numbers, dtype=np.int64)
    lookup = np.full(max(ATOM_TYPES) + 1, -1, dtype=np.int64)
    lookup[list(ATOM_TYPES)] = np.arange(len(ATOM_TYPES))
    type_index = lookup[np.clip(z, 0, max(ATOM_TYPES))]
    if z.size and (type_index.min() < 0 or z.max() > max(ATOM_TYPES)):
        bad = sorted(set(z[(type_index < 0) | (z > max(ATOM_TYPES))].tolist()))
        raise ValueError(f"QM9 holds only H, C, N, O and F; got atomic numbers {bad}")
    bond_types = np.asarray(raw.bond_types, dtype=np.int64)
    if bond_types.size and not (0 <= bond_types.min() and bond_types.max() < len(BOND_TYPES)):
        raise ValueError(f"bond types must lie in [0, {len(BOND_TYPES)})")

    # Both directions of every bond, in global atom ids, sorted by (target, source): molecules
    # own contiguous id ranges, so this also groups the edges by molecule.
    offset = raw.atom_ptr[:-1][_molecule_of(raw.bond_ptr)]
    first, second = raw.bonds[:, 0] + offset, raw.bonds[:, 1] + offset
    src, dst = np.concatenate([first, second]), np.concatenate([second, first])
    kinds = np.concatenate([bond_types, bond_types])
    order = np.lexsort((src, dst))
    src, dst, kinds = src[order], dst[order], kinds[order]
    edge_molecule = _molecule_of(raw.atom_ptr)[dst]
    edge_ptr = np.zeros(raw.atom_ptr.size, dtype=np.int64)
    np.cumsum(np.bincount(edge_molecule, minlength=raw.atom_ptr.size - 1), out=edge_ptr[1:])

    x = np.zeros((z.size, NUM_NODE_FEATURES), dtype=np.float32)
    x[np.arange(z.size), type_index] = 1.0
    x[:, 5] = z
    # Columns 6-9 (aromatic, sp, sp2, sp3) stay zero, as in PyG's QM9.
    x[:, 10] = np.bincount(dst, weights=(z[src] == 1), minlength=z.size)
    edge_attr = np.zeros((kinds.size, len(BOND_TYPES)), dtype=np.float32)
    edge_attr[np.arange(kinds.size), kinds] = 1.0
    local = raw.atom_ptr[:-1][edge_molecule]
    edge_index = np.stack([src - local, dst - local])
    return MoleculeArrays(x, edge_index, edge_attr, edge_ptr)
