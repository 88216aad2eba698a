"""QM9: PyG's features, order and units, checked by hand on QM9's first molecules, from the
canonical format (a fixture) and from the real qm9pack copy (skipped when not installed)."""

import importlib.util

import numpy as np
import pytest
import torch
from qm9_fixture import write_canonical

from galfast.datasets import DatasetNotFoundError, qm9
from galfast.datasets import qm9_loader as qm9_module
from galfast.datasets.qm9_bonds import ORDER_FROM_SMILES, perceive_bonds
from galfast.datasets.qm9_cache import cache_path
from galfast.datasets.qm9_canonical import read_sdf
from galfast.datasets.qm9_qm9pack import _parse, _rows, qm9pack_folder, read_qm9pack
from galfast.datasets.qm9_targets import (
    ATOMIC_REFERENCE_HARTREE,
    HARTREE_TO_EV,
    KCAL_PER_MOL_TO_EV,
    QM9_TARGETS,
)

H, C, N, OX = (
    [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0],
    [0, 1, 0, 0, 0, 6, 0, 0, 0, 0],
    [0, 0, 1, 0, 0, 7, 0, 0, 0, 0],
    [0, 0, 0, 1, 0, 8, 0, 0, 0, 0],
)
SINGLE, DOUBLE, TRIPLE, AROMATIC = ([float(i == k) for i in range(4)] for k in range(4))

# QM9's first molecules (gdb_3, water, is dropped as uncharacterised in the fixture), by hand:
# atoms' features (the last entry: bonded hydrogens) and edges (source, target, bond type)
# sorted by target, then source.
EXPECTED = {
    1: ([C + [4], H, H, H, H],
        [(1, 0, SINGLE), (2, 0, SINGLE), (3, 0, SINGLE), (4, 0, SINGLE),
         (0, 1, SINGLE), (0, 2, SINGLE), (0, 3, SINGLE), (0, 4, SINGLE)]),
    2: ([N + [3], H, H, H],
        [(1, 0, SINGLE), (2, 0, SINGLE), (3, 0, SINGLE),
         (0, 1, SINGLE), (0, 2, SINGLE), (0, 3, SINGLE)]),
    4: ([C + [1], C + [1], H, H],
        [(1, 0, TRIPLE), (3, 0, SINGLE), (0, 1, TRIPLE), (2, 1, SINGLE),
         (1, 2, SINGLE), (0, 3, SINGLE)]),
    5: ([C + [1], N + [0], H],
        [(1, 0, TRIPLE), (2, 0, SINGLE), (0, 1, TRIPLE), (0, 2, SINGLE)]),
    6: ([C + [2], OX + [0], H, H],
        [(1, 0, DOUBLE), (2, 0, SINGLE), (3, 0, SINGLE), (0, 1, DOUBLE),
         (0, 2, SINGLE), (0, 3, SINGLE)]),
}  # fmt: skip

# Methane's targets by hand from QM9's values and PyG's units (Hartree and kcal/mol -> eV).
METHANE = [
    0.0, 13.21, -0.3877 * HARTREE_TO_EV, 0.1171 * HARTREE_TO_EV, 0.5048 * HARTREE_TO_EV,
    35.3641, 0.044749 * HARTREE_TO_EV, -40.47893 * HARTREE_TO_EV, -40.476062 * HARTREE_TO_EV,
    -40.475117 * HARTREE_TO_EV, -40.498597 * HARTREE_TO_EV, 6.469,
    -395.999594594 * KCAL_PER_MOL_TO_EV, -398.64329012 * KCAL_PER_MOL_TO_EV,
    -401.014646522 * KCAL_PER_MOL_TO_EV, -372.471772148 * KCAL_PER_MOL_TO_EV,
    157.7118, 157.70997, 157.70699,
]  # fmt: skip

needs_qm9pack = pytest.mark.skipif(
    qm9pack_folder() is None or importlib.util.find_spec("rdkit") is None,
    reason="qm9pack and rdkit are not installed (pip install galfast[qm9])",
)


def _molecule(ds, g):
    atoms = slice(int(ds.node_ptr[g]), int(ds.node_ptr[g + 1]))
    edges = slice(int(ds.edge_ptr[g]), int(ds.edge_ptr[g + 1]))
    return ds.x[atoms], ds.edge_index[:, edges], ds.edge_attr[edges]


def _check_expected(ds, positions):
    for g, gdb in enumerate(positions):
        x, edge_index, edge_attr = _molecule(ds, g)
        atoms, edges = EXPECTED[gdb]
        assert x.tolist() == atoms, f"gdb_{gdb}"
        got = [(s, t, a) for (s, t), a in zip(edge_index.t().tolist(), edge_attr.tolist())]
        assert got == edges, f"gdb_{gdb}"


@pytest.fixture
def canonical(tmp_path):
    return qm9(write_canonical(tmp_path / "qm9"), source="canonical", download=False)


def test_canonical_release_gives_pyg_features_by_hand(canonical):
    # gdb_3 is dropped (uncharacterised); the made-up last record keeps its aromatic bond.
    assert canonical.ids.tolist() == [1, 2, 4, 5, 6, 7]
    _check_expected(canonical, [1, 2, 4, 5, 6])
    assert _molecule(canonical, 5)[2].tolist() == [AROMATIC, AROMATIC]
    assert canonical.x[:, 6:10].abs().sum() == 0  # aromatic, sp, sp2, sp3: zero as in PyG
    assert canonical.pos[0].tolist() == pytest.approx([-0.0127, 1.0858, 0.0080], abs=1e-6)
    assert canonical.z[:5].tolist() == [6, 1, 1, 1, 1]
    assert canonical.y[0].tolist() == pytest.approx(METHANE, rel=1e-6, abs=1e-6)
    assert canonical.target("alpha").tolist() == canonical.attributes["alpha"].tolist()
    assert canonical.attributes["alpha"][:2].tolist() == pytest.approx([13.21, 9.46])
    assert canonical.target_names[:2] == ("mu", "alpha") == QM9_TARGETS[:2]


def test_sdf_reader_agrees_with_rdkit_as_pyg_reads_it(tmp_path):
    chem = pytest.importorskip("rdkit.Chem")
    folder = write_canonical(tmp_path)
    molecules, count = read_sdf(folder / "gdb9.sdf")
    supplier = chem.SDMolSupplier(str(folder / "gdb9.sdf"), removeHs=False, sanitize=False)
    kinds = {"SINGLE": 0, "DOUBLE": 1, "TRIPLE": 2, "AROMATIC": 3}
    for g, mol in enumerate(supplier):
        atoms = slice(molecules.atom_ptr[g], molecules.atom_ptr[g + 1])
        bonds = slice(molecules.bond_ptr[g], molecules.bond_ptr[g + 1])
        assert molecules.atomic_numbers[atoms].tolist() == [
            a.GetAtomicNum() for a in mol.GetAtoms()
        ]
        assert np.allclose(molecules.positions[atoms], mol.GetConformer().GetPositions())
        assert molecules.bonds[bonds].tolist() == [
            [b.GetBeginAtomIdx(), b.GetEndAtomIdx()] for b in mol.GetBonds()
        ]
        assert molecules.bond_types[bonds].tolist() == [
            kinds[str(b.GetBondType())] for b in mol.GetBonds()
        ]
        # What PyG's process() reads off these atoms: no aromatic flag, no hybridisation.
        assert not any(a.GetIsAromatic() for a in mol.GetAtoms())
        assert {str(a.GetHybridization()) for a in mol.GetAtoms()} == {"UNSPECIFIED"}
    assert count == 7


def test_units_and_reference_energies_match_pyg_definitions():
    pyg_qm9 = pytest.importorskip("torch_geometric.datasets.qm9")
    assert HARTREE_TO_EV == pyg_qm9.HAR2EV and KCAL_PER_MOL_TO_EV == pyg_qm9.KCALMOL2EV
    # PyG's atomrefs (eV) for U0, U, H, G are QM9's reference energies (Hartree) in eV.
    for column, target in enumerate((7, 8, 9, 10)):
        ours = [ATOMIC_REFERENCE_HARTREE[z][column] * HARTREE_TO_EV for z in (1, 6, 7, 8, 9)]
        assert ours == pytest.approx(pyg_qm9.atomrefs[target], rel=1e-8)


def test_cache_is_written_once_and_reused(tmp_path, monkeypatch):
    folder = write_canonical(tmp_path / "qm9")
    first = qm9(folder, source="canonical", download=False)
    assert cache_path(folder, "canonical").is_file()

    def fail(*args):
        raise AssertionError("the cache should have been used")

    monkeypatch.setattr(qm9_module, "read_canonical", fail)
    again = qm9(folder, download=False)
    assert torch.equal(first.x, again.x) and torch.equal(first.y, again.y)
    assert torch.equal(first.edge_index, again.edge_index) and first.notes == again.notes


def test_stale_cache_version_is_ignored(tmp_path, monkeypatch):
    folder = write_canonical(tmp_path / "qm9")
    qm9(folder, source="canonical", download=False)
    monkeypatch.setattr("galfast.datasets.qm9_cache.CACHE_VERSION", 2)
    calls = []
    original = qm9_module.read_canonical
    monkeypatch.setattr(qm9_module, "read_canonical", lambda f: calls.append(f) or original(f))
    qm9(folder, source="canonical", download=False)
    assert calls and (folder / "qm9_canonical_v2.npz").is_file()


def test_no_source_raises_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(qm9_module, "qm9pack_folder", lambda: None)
    with pytest.raises(DatasetNotFoundError, match=r"galfast\[qm9\].*gdb9\.sdf"):
        qm9(tmp_path, download=False)
    with pytest.raises(DatasetNotFoundError, match=r"qm9pack( and rdkit)? not installed"):
        qm9(tmp_path, source="qm9pack")
    with pytest.raises(ValueError, match="unknown QM9 source"):
        qm9(tmp_path, source="pyg")


def test_failed_download_names_the_files_and_the_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(qm9_module, "qm9pack_folder", lambda: None)

    def offline(url, timeout):
        raise OSError("no network")

    with pytest.raises(DatasetNotFoundError, match="download failed .*no network"):
        qm9(tmp_path, opener=offline)
    assert not list((tmp_path / "raw").glob("*.zip"))


@needs_qm9pack
def test_qm9pack_first_molecules_match_pyg_by_hand():
    molecules, how = read_qm9pack(qm9pack_folder(), limit=6, workers=1)
    ds = qm9_module._dataset(molecules, ())
    assert ds.ids.tolist() == [1, 2, 3, 4, 5, 6] and how == {0: 6}
    _check_expected(qm9_module._dataset(*_drop_water(molecules)), [1, 2, 4, 5, 6])
    assert ds.y[0].tolist() == pytest.approx(METHANE, rel=1e-6, abs=1e-6)
    assert ds.pos[0].tolist() == pytest.approx([-0.0126981359, 1.0858041578, 0.0080009958])


def _drop_water(molecules):
    from galfast.datasets.qm9_canonical import _select

    return _select(molecules, np.array([0, 1, 3, 4, 5])), ()


@needs_qm9pack
def test_qm9pack_targets_agree_with_the_canonical_release(canonical):
    # Atomisation energies are rebuilt from total energies for qm9pack; MoleculeNet's CSV
    # gives them directly. The five characterised fixture molecules are QM9's gdb_1,2,4,5,6.
    molecules, _ = read_qm9pack(qm9pack_folder(), limit=6, workers=1)
    offline = torch.from_numpy(molecules.targets[[0, 1, 3, 4, 5]])
    assert torch.allclose(offline, canonical.y[:5], rtol=2e-6, atol=1e-5)


@needs_qm9pack
def test_geometric_bonds_keep_pyg_s_long_bond_of_gdb_1150():
    # PyG's SDF bonds atoms 2 and 4 (1-based) of gdb_1150 at 1.87 A; its SMILES does not.
    row = next(r for _, r in _rows(qm9pack_folder(), 1200) if r[1] == "1150")
    numbers, positions = _parse(row)
    bonds, types, how = perceive_bonds(numbers, positions, row[2])
    assert [1, 3] in bonds.tolist() and how == ORDER_FROM_SMILES
    assert set(types.tolist()) == {0}  # CC12CC(C)(C1)O2 has single bonds only


@needs_qm9pack
def test_full_qm9pack_dataset_has_pyg_s_size(tmp_path):
    ds = qm9(source="qm9pack", download=False)  # the shared cache: processed once
    assert len(ds) == 130_831 and ds.num_node_features == 11 and ds.num_edge_features == 4
    assert ds.ids[0] == 1 and ds.ids[-1] == 133_885
    assert ds.x[:, 6:10].abs().sum() == 0
    # PyG's QM9: ~18.0 atoms and ~37.3 directed edges per molecule.
    assert abs(ds.x.size(0) / len(ds) - 18.0) < 0.05
    assert abs(ds.edge_index.size(1) / len(ds) - 37.3) < 0.2
