"""Bonds of a QM9 molecule perceived with RDKit from its 3-D geometry (the qm9pack source).

The canonical SDF that PyG's QM9 reads got its bonds from the geometry too (MoleculeNet
converted the QM9 XYZ files), so connectivity is taken from the geometry here
(``rdDetermineBonds``, covalent radii), keeping the long bonds such a perception finds and the
molecule's SMILES lacks (e.g. the 1.87 A C-C contact of gdb_1150 that PyG's graph has).
Bond orders are the Kekule structure of ``DetermineBonds`` (the SDF has no aromatic bonds
either). When no neutral bond-order assignment exists for that connectivity (6,810 of the
130,831 molecules: an extra bond makes an atom hypervalent), the orders come from the molecule's
SMILES, matched onto the geometric graph; bonds the SMILES lacks stay single.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ORDER_FROM_GEOMETRY", "ORDER_FROM_SMILES", "ORDER_SINGLE", "perceive_bonds"]

ORDER_FROM_GEOMETRY, ORDER_FROM_SMILES, ORDER_SINGLE = 0, 1, 2
_SYMBOLS = {1: "H", 6: "C", 7: "N", 8: "O", 9: "F"}


def _xyz_block(numbers: np.ndarray, positions: np.ndarray) -> str:
    atoms = "\n".join(
        f"{_SYMBOLS[int(z)]} {x:.10f} {y:.10f} {w:.10f}"
        for z, (x, y, w) in zip(numbers, positions.tolist())
    )
    return f"{len(numbers)}\n\n{atoms}\n"


def _bond_type_index(bond) -> int:
    from rdkit.Chem import BondType

    return {BondType.SINGLE: 0, BondType.DOUBLE: 1, BondType.TRIPLE: 2}[bond.GetBondType()]


def _orders_from_smiles(connected, smiles: str) -> dict[tuple[int, int], int]:
    """Bond orders of `smiles` (Kekule form) on the atoms of `connected` (single bonds only),
    or an empty dict when the SMILES graph is not a subgraph of the geometric one."""
    from rdkit import Chem

    template = Chem.MolFromSmiles(smiles)
    if template is None:
        return {}
    template = Chem.AddHs(template)
    Chem.Kekulize(template, clearAromaticFlags=True)
    query = Chem.RWMol(template)
    for bond in query.GetBonds():
        bond.SetBondType(Chem.BondType.SINGLE)
    for atom in query.GetAtoms():  # the geometric graph carries no charges
        atom.SetFormalCharge(0)
    connected.UpdatePropertyCache(strict=False)
    match = connected.GetSubstructMatch(query.GetMol())
    if not match:
        return {}
    orders = {}
    for bond in template.GetBonds():
        i, j = match[bond.GetBeginAtomIdx()], match[bond.GetEndAtomIdx()]
        orders[(min(i, j), max(i, j))] = _bond_type_index(bond)
    return orders


def perceive_bonds(
    numbers: np.ndarray, positions: np.ndarray, smiles: str
) -> tuple[np.ndarray, np.ndarray, int]:
    """``(bonds [B, 2] with i < j, bond types [B] (0 single, 1 double, 2 triple), how the
    orders were found: ORDER_FROM_GEOMETRY, ORDER_FROM_SMILES or ORDER_SINGLE)``."""
    from rdkit import Chem
    from rdkit.Chem import rdDetermineBonds

    block = _xyz_block(numbers, positions)
    mol = Chem.MolFromXYZBlock(block)
    how = ORDER_FROM_GEOMETRY
    try:
        rdDetermineBonds.DetermineBonds(mol, charge=0)
        Chem.Kekulize(mol, clearAromaticFlags=True)
        orders = {}
    except (ValueError, RuntimeError):
        mol = Chem.MolFromXYZBlock(block)
        rdDetermineBonds.DetermineConnectivity(mol)
        orders = _orders_from_smiles(mol, smiles)
        how = ORDER_FROM_SMILES if orders else ORDER_SINGLE
    bonds, types = [], []
    for bond in mol.GetBonds():
        i, j = sorted((bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()))
        bonds.append((i, j))
        geometric = how == ORDER_FROM_GEOMETRY
        types.append(_bond_type_index(bond) if geometric else orders.get((i, j), 0))
    return (
        np.asarray(bonds, dtype=np.int64).reshape(-1, 2),
        np.asarray(types, dtype=np.int64),
        how,
    )
