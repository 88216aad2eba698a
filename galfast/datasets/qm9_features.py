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

__all__ = ["ATOM_TYPES", "BOND_TYPES", "MoleculeArrays", "RawMolecules", "pyg_features"]

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
