"""QM9's readers on damaged input: truncated, edited or foreign raw files and caches must fail
with a ValueError (or OSError) naming the file and the problem, never a bare IndexError,
KeyError or UnicodeDecodeError from deep inside, and never load as wrong molecules."""

import csv

import numpy as np
import pytest
from qm9_fixture import write_canonical

from galfast.cli import main
from galfast.datasets import qm9, qm9_qm9pack
from galfast.datasets import qm9_loader as qm9_module
from galfast.datasets.qm9_cache import cache_path
from galfast.datasets.qm9_qm9pack import QM9PACK_FILES, read_qm9pack


def _load(folder):
    return qm9(folder, source="canonical", download=False)


def _edit(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def _fails_naming(folder, name, match, error=ValueError):
    with pytest.raises(error, match=match) as caught:
        _load(folder)
    assert str(folder / name) in str(caught.value)


# Edits of gdb9.sdf: methane's counts line is "  5  4  0", its first bond "  1  2  1  0".
SDF_DAMAGE = {
    "counts line cut off": (lambda t: "\n".join(t.split("\n")[:3]), "no closing"),
    "no $$$$ after a record": (lambda t: t.replace("$$$$", ""), "no closing"),
    "more atoms than lines": (lambda t: t.replace("  5  4  0", "999  4  0", 1), "999 atoms"),
    "negative atom count": (lambda t: t.replace("  5  4  0", " -5  4  0", 1), "-5 atoms"),
    "zero atoms": (lambda t: t.replace("  5  4  0", "  0  0  0", 1), "0 atoms"),
    "NaN position": (lambda t: t.replace("   -0.0127", "       nan", 1), "NaN"),
    "bond to itself": (lambda t: t.replace("  1  2  1  0", "  1  1  1  0", 1), "atoms 1 and 1"),
    "bond past the atoms": (lambda t: t.replace("  1  2  1  0", "  1  9  1  0", 1), "1 and 9"),
    "blank line between records": (lambda t: t.replace("$$$$\n", "$$$$\n\n", 1), "record 2"),
}


@pytest.mark.parametrize("damage", SDF_DAMAGE)
def test_damaged_sdf_names_the_file_and_the_record(tmp_path, damage):
    edit, match = SDF_DAMAGE[damage]
    folder = write_canonical(tmp_path)
    (folder / "gdb9.sdf").write_text(edit((folder / "gdb9.sdf").read_text()))
    _fails_naming(folder, "gdb9.sdf", match)


@pytest.mark.parametrize("name", ["gdb9.sdf", "gdb9.sdf.csv", "uncharacterized.txt"])
def test_non_utf8_raw_file_is_named(tmp_path, name):
    folder = write_canonical(tmp_path)
    (folder / name).write_bytes(b"\xff\xfe" + (folder / name).read_bytes())
    _fails_naming(folder, name, "not a text file")


# Edits of gdb9.sdf.csv: 13.21 is methane's polarizability, gdb_2 the second row.
CSV_DAMAGE = {
    "NaN target": (lambda t: t.replace("13.21", "nan", 1), "NaN"),
    "infinite target": (lambda t: t.replace("13.21", "inf", 1), "infinite"),
    "too large for float32": (lambda t: t.replace("13.21", "1e300", 1), "too large"),
    "text for a number": (lambda t: t.replace("13.21", "abc", 1), "line 2.*abc"),
    "row cut short": (lambda t: t[:-30], "aromatic_pair"),
    "row of another molecule": (lambda t: t.replace("gdb_2,", "gdb_9,", 1), "gdb_2"),
    "row repeated": (lambda t: t.replace("gdb_2,", "gdb_1,", 1), "gdb_2"),
    "not a CSV": (lambda t: "mol_id\n" + "x" * 200_000, "not MoleculeNet's CSV"),
    "columns reordered": (lambda t: t.replace("mu,alpha", "alpha,mu", 1), "line 1 should be"),
    "another CSV's header": (lambda t: t.replace("mol_id,", "mol_id,smiles,", 1), "line 1"),
    "empty": (lambda t: "", "line 1 should be"),
}


@pytest.mark.parametrize("damage", CSV_DAMAGE)
def test_damaged_targets_name_the_file_and_the_line(tmp_path, damage):
    edit, match = CSV_DAMAGE[damage]
    folder = write_canonical(tmp_path)
    (folder / "gdb9.sdf.csv").write_text(edit((folder / "gdb9.sdf.csv").read_text()))
    _fails_naming(folder, "gdb9.sdf.csv", match)


SKIP_LIST_DAMAGE = {
    "empty": (lambda t: "", "too few"),
    "blank line in the body": (lambda t: t.replace(" footer", "\n footer"), "line 11"),
    "molecule past the SDF": (lambda t: t.replace("     3", "  9999"), "9999"),
}


@pytest.mark.parametrize("damage", SKIP_LIST_DAMAGE)
def test_damaged_skip_list_names_the_file(tmp_path, damage):
    edit, match = SKIP_LIST_DAMAGE[damage]
    folder = write_canonical(tmp_path)
    path = folder / "uncharacterized.txt"
    path.write_text(edit(path.read_text()))
    _fails_naming(folder, "uncharacterized.txt", match)


def test_skip_list_without_final_newline_still_drops_its_last_molecule(tmp_path):
    folder = write_canonical(tmp_path)
    path = folder / "uncharacterized.txt"
    path.write_text(path.read_text().rstrip("\n"))
    assert _load(folder).ids.tolist() == [1, 2, 4, 5, 6, 7]


def test_skip_list_dropping_every_molecule_is_refused(tmp_path):
    folder = write_canonical(tmp_path)
    body = "\n".join(f"  {index}" for index in range(1, 8))
    _edit(folder / "uncharacterized.txt", "       3  C  (uncharacterised)", body)
    with pytest.raises(ValueError, match="no molecule is left"):
        _load(folder)


def _rewrite_cache(path, **arrays):
    with np.load(path) as archive:
        stored = dict(archive)
    for key, value in arrays.items():
        if value is None:
            del stored[key]
        else:
            stored[key] = value(stored[key])
    np.savez(path, **stored)


CACHE_DAMAGE = {
    "truncated": lambda path: path.write_bytes(path.read_bytes()[:500]),
    "empty": lambda path: path.write_bytes(b""),
    "an array missing": lambda path: _rewrite_cache(path, version=None),
    "bonds past their molecule": lambda path: _rewrite_cache(path, bonds=lambda b: b + 50),
    "offsets cut short": lambda path: _rewrite_cache(path, atom_ptr=lambda p: p[:-1]),
    "NaN targets": lambda path: _rewrite_cache(path, targets=lambda t: t * np.nan),
}


@pytest.mark.parametrize("damage", CACHE_DAMAGE)
def test_damaged_cache_is_refused_naming_it(tmp_path, damage):
    folder = write_canonical(tmp_path)
    _load(folder)
    path = cache_path(folder, "canonical")
    CACHE_DAMAGE[damage](path)
    with pytest.raises(ValueError, match="damaged QM9 cache.*delete it") as caught:
        _load(folder)
    assert str(path) in str(caught.value)


def test_folder_in_place_of_the_cache_fails_before_processing(tmp_path, monkeypatch):
    folder = write_canonical(tmp_path)
    cache_path(folder, "canonical").mkdir()

    def fail(*args):
        raise AssertionError("the raw files were parsed before the cache path was checked")

    monkeypatch.setattr(qm9_module, "read_canonical", fail)
    with pytest.raises(IsADirectoryError):
        _load(folder)


def test_cli_reports_a_truncated_sdf_in_one_line(tmp_path, capsys):
    folder = write_canonical(tmp_path)
    (folder / "gdb9.sdf").write_text("gdb_1\n  -OEChem-03231823253D\n\n")
    argv = ["run", "--dataset", "qm9", "--root", str(folder), "--encoder", "mpnn"]
    assert main([*argv, "--option", "source=canonical", "--option", "download=False"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and str(folder / "gdb9.sdf") in error


# qm9pack's CSV layout as read_qm9pack indexes it: 1 index, 2 SMILES, 6 elements, 7 XYZ,
# 10-24 the 15 properties.
METHANE_ELEMENTS = "['C','H','H','H','H']"
METHANE_XYZ = "[0,0,0, 1.09,0,0, 0,1.09,0, 0,0,1.09, -0.6,-0.6,-0.6]"


def _qm9pack_row(index, elements=METHANE_ELEMENTS, xyz=METHANE_XYZ, value="1.5"):
    fields = ["0", str(index), "C", "", "", "", f'"{elements}"', f'"{xyz}"', "", ""]
    return ",".join(fields + [value] * 15)


def _write_qm9pack(folder, first_part):
    folder.mkdir()
    header = ",".join(f"column{i}" for i in range(25))
    parts = [first_part, _qm9pack_row(2), _qm9pack_row(3)]
    for name, text in zip(QM9PACK_FILES, parts):
        (folder / name).write_text(f"{header}\n{text}\n" if text is not None else "")
    return folder


QM9PACK_DAMAGE = {
    "empty file": (None, "empty"),
    "unknown element": (_qm9pack_row(1, elements="['C','Cl','H','H','H']"), "'Cl'"),
    "no atoms": (_qm9pack_row(1, elements="[]", xyz="[]"), "no atoms"),
    "row cut short": ("0,1,C", "3 fields"),
    "NaN position": (_qm9pack_row(1, xyz=METHANE_XYZ.replace("1.09", "nan", 1)), "bad XYZ"),
    "NaN property": (_qm9pack_row(1, value="nan"), "NaN"),
    "id repeated": (_qm9pack_row(2), "id 2 appears twice"),
}


@pytest.mark.parametrize("damage", QM9PACK_DAMAGE)
def test_damaged_qm9pack_rows_name_the_file(tmp_path, monkeypatch, damage):
    # RDKit's bond perception is not needed to read the rows: none here.
    no_bonds = (np.zeros((0, 2), np.int64), np.zeros(0, np.int64), 0)
    monkeypatch.setattr(qm9_qm9pack, "_perceive_all", lambda chunk, workers: [no_bonds] * 3)
    first_part, match = QM9PACK_DAMAGE[damage]
    folder = _write_qm9pack(tmp_path / "data", first_part)
    with pytest.raises(ValueError, match=match) as caught:
        read_qm9pack(folder, workers=1)
    assert str(folder) in str(caught.value)


def test_non_utf8_qm9pack_file_is_named(tmp_path):
    folder = _write_qm9pack(tmp_path / "data", _qm9pack_row(1))
    path = folder / QM9PACK_FILES[1]
    path.write_bytes(b"\xff\xfe" + path.read_bytes())
    with pytest.raises(ValueError, match="not qm9pack's CSV") as caught:
        read_qm9pack(folder, workers=1)
    assert str(path) in str(caught.value)


def test_qm9pack_read_puts_csv_field_limit_back(tmp_path, monkeypatch):
    # The limit is process-wide: left raised, the canonical reader's guard against a file that
    # is no CSV (one huge field) depended on whether qm9pack had been read before.
    no_bonds = (np.zeros((0, 2), np.int64), np.zeros(0, np.int64), 0)
    monkeypatch.setattr(qm9_qm9pack, "_perceive_all", lambda chunk, workers: [no_bonds] * 3)
    folder = _write_qm9pack(tmp_path / "data", _qm9pack_row(1))
    before = csv.field_size_limit()
    read_qm9pack(folder, workers=1)
    assert csv.field_size_limit() == before


def test_qm9pack_install_missing_molecules_is_refused(tmp_path, monkeypatch):
    # A part file cut at a row boundary reads as valid rows: the loader checks the count.
    no_bonds = (np.zeros((0, 2), np.int64), np.zeros(0, np.int64), 0)
    monkeypatch.setattr(qm9_qm9pack, "_perceive_all", lambda chunk, workers: [no_bonds] * 3)
    folder = _write_qm9pack(tmp_path / "data", _qm9pack_row(1))
    monkeypatch.setattr(qm9_module, "qm9pack_folder", lambda: folder)
    monkeypatch.setattr(qm9_module, "rdkit_available", lambda: True)
    with pytest.raises(ValueError, match="hold 3 molecules, not 130,831") as caught:
        qm9(tmp_path / "cache", source="qm9pack", download=False)
    assert str(folder) in str(caught.value)
