"""QM9's 19 regression targets in PyG's order and units, from either source's raw columns.

PyG's ``QM9`` reads the canonical release's ``gdb9.sdf.csv`` (MoleculeNet), moves the three
rotational constants to the end and converts Hartree to eV and kcal/mol to eV. The qm9pack CSVs
hold the same quantities as the original QM9 XYZ files (Hartree) but no atomisation energies:
those are rebuilt here from the total energies and QM9's atomic reference energies, with the
factor MoleculeNet used (1 Hartree = 627.509 kcal/mol), so both sources agree to float32.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "ATOMIC_REFERENCE_HARTREE",
    "QM9_TARGETS",
    "QM9_UNITS",
    "targets_from_moleculenet",
    "targets_from_xyz_properties",
]

HARTREE_TO_EV = 27.211386246
KCAL_PER_MOL_TO_EV = 0.04336414
HARTREE_TO_KCAL_PER_MOL = 627.509  # MoleculeNet's factor for its atomisation energies

QM9_TARGETS = (
    "mu", "alpha", "homo", "lumo", "gap", "r2", "zpve", "u0", "u298", "h298", "g298", "cv",
    "u0_atom", "u298_atom", "h298_atom", "g298_atom", "A", "B", "C",
)  # fmt: skip
QM9_UNITS = (
    "D", "bohr^3", "eV", "eV", "eV", "bohr^2", "eV", "eV", "eV", "eV", "eV", "cal/(mol K)",
    "eV", "eV", "eV", "eV", "GHz", "GHz", "GHz",
)  # fmt: skip

# Per target, the factor from the raw unit (MoleculeNet's CSV, or the XYZ files for the first
# 12) to PyG's unit.
_TO_PYG_UNIT = np.array(
    [1.0, 1.0] + [HARTREE_TO_EV] * 3 + [1.0] + [HARTREE_TO_EV] * 5 + [1.0]
    + [KCAL_PER_MOL_TO_EV] * 4 + [1.0] * 3,
    dtype=np.float32,
)  # fmt: skip

# QM9's isolated-atom energies (B3LYP/6-31G(2df,p), Hartree; the release's atomref table):
# atomic number -> (U0, U298, H298, G298).
ATOMIC_REFERENCE_HARTREE = {
    1: (-0.500273, -0.498857, -0.497912, -0.510927),
    6: (-37.846772, -37.845355, -37.844411, -37.861317),
    7: (-54.583861, -54.582445, -54.581501, -54.598897),
    8: (-75.064579, -75.063162, -75.062219, -75.079532),
    9: (-99.718730, -99.717314, -99.716370, -99.733544),
}


def targets_from_moleculenet(columns: np.ndarray) -> np.ndarray:
    """``[G, 19]`` float32 targets from MoleculeNet's ``gdb9.sdf.csv`` value columns (A, B, C,
    mu, alpha, homo, lumo, gap, r2, zpve, u0, u298, h298, g298, cv, then the four atomisation
    energies in kcal/mol), in PyG's order and units."""
    raw = np.asarray(columns, dtype=np.float32)
    if raw.ndim != 2 or raw.shape[1] != 19:
        raise ValueError(f"expected [G, 19] target columns, got shape {list(raw.shape)}")
    reordered = np.concatenate([raw[:, 3:], raw[:, :3]], axis=1)
    return reordered * _TO_PYG_UNIT


def targets_from_xyz_properties(
    properties: np.ndarray, atomic_numbers: np.ndarray, atom_ptr: np.ndarray
) -> np.ndarray:
    """``[G, 19]`` float32 targets from the QM9 XYZ files' 15 properties per molecule (A, B, C,
    mu, alpha, homo, lumo, gap, r2, zpve, u0, u298, h298, g298, cv; energies in Hartree) and
    the molecules' atoms (``atomic_numbers`` ``[N]``, molecule ``g`` owns
    ``atom_ptr[g]:atom_ptr[g+1]``)."""
    props = np.asarray(properties, dtype=np.float64)
    if props.ndim != 2 or props.shape[1] != 15:
        raise ValueError(f"expected [G, 15] properties, got shape {list(props.shape)}")
    unknown = set(np.unique(atomic_numbers).tolist()) - set(ATOMIC_REFERENCE_HARTREE)
    if unknown:
        raise ValueError(f"no QM9 reference energy for atomic numbers {sorted(unknown)}")
    table = np.zeros((max(ATOMIC_REFERENCE_HARTREE) + 1, 4))
    for number, energies in ATOMIC_REFERENCE_HARTREE.items():
        table[number] = energies
    molecule = np.repeat(np.arange(props.shape[0]), np.diff(atom_ptr))
    reference = np.zeros((props.shape[0], 4))
    np.add.at(reference, molecule, table[atomic_numbers])
    atomisation = (props[:, 10:14] - reference) * HARTREE_TO_KCAL_PER_MOL
    # Through float32 like PyG's parse of MoleculeNet's CSV, then the same unit conversion.
    columns = np.concatenate([props.astype(np.float32), atomisation.astype(np.float32)], axis=1)
    return targets_from_moleculenet(columns)
