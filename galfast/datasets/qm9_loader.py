"""QM9 (130,831 small organic molecules) as PyG's ``QM9`` builds it: the same molecules in
the same order, node and edge features, positions and the 19 targets in PyG's units."""

from __future__ import annotations

import os
import time
import urllib.request
import zipfile
from pathlib import Path
from typing import Callable, Optional, Union

import numpy as np
import torch

from galfast._args import check_flag, check_int
from galfast.datasets.download import (
    DatasetNotFoundError,
    check_opener,
    check_root,
    data_dir,
    fetch,
    pin_path,
)
from galfast.datasets.molecule_dataset import MoleculeDataset
from galfast.datasets.qm9_bonds import ORDER_FROM_SMILES, ORDER_SINGLE
from galfast.datasets.qm9_cache import cache_path, load_cache, save_cache
from galfast.datasets.qm9_canonical import RAW_FILES, RESOURCES, read_canonical
from galfast.datasets.qm9_features import RawMolecules, pyg_features
from galfast.datasets.qm9_qm9pack import (
    QM9PACK_FILES,
    QM9PACK_MOLECULES,
    qm9pack_folder,
    rdkit_available,
    read_qm9pack,
)
from galfast.datasets.qm9_targets import QM9_TARGETS, QM9_UNITS

__all__ = ["QM9_SOURCES", "qm9", "qm9_files"]

QM9_SOURCES = ("auto", "canonical", "qm9pack")
_PARSED_SOURCES = QM9_SOURCES[1:]  # what "auto" tries, and the caches it may write

LICENSE = (
    "QM9: R. Ramakrishnan, P. O. Dral, M. Rupp, O. A. von Lilienfeld, 'Quantum chemistry "
    "structures and properties of 134 kilo molecules', Scientific Data 1, 140022 (2014); the "
    "molecules are from GDB-17 (L. Ruddigkeit et al., J. Chem. Inf. Model. 52, 2864 (2012)). "
    "Canonical copy: MoleculeNet (Z. Wu et al., Chem. Sci. 9, 513 (2018)); offline copy: the "
    "qm9pack package (MIT licence). Cite the QM9 paper when you use the data."
)

_ZERO_COLUMNS = (
    "Atom feature columns 6-9 (aromatic, sp, sp2, sp3) are zero for every atom, as in PyG's "
    "QM9, whose RDKit reading (sanitize=False) never sets them."
)


def _folder(root: Optional[Path]) -> Path:
    return root if root is not None else data_dir() / "qm9"


def _download_folder(folder: Path) -> Path:
    """Where the canonical release is downloaded and unpacked."""
    return folder / "raw"


def _canonical_folder(folder: Path) -> Optional[Path]:
    for candidate in (folder, _download_folder(folder)):
        if all((candidate / name).is_file() for name in RAW_FILES):
            return candidate
    return None


def _download_canonical(folder: Path, opener: Callable[..., object]) -> Path:
    raw = _download_folder(folder)
    archive = fetch(RESOURCES[0], raw, opener=opener)
    fetch(RESOURCES[1], raw, opener=opener)
    try:
        _extract(archive, raw)
    except (zipfile.BadZipFile, KeyError) as error:  # a damaged or another archive
        raise ValueError(
            f"{archive}: not MoleculeNet's qm9.zip with {' and '.join(RAW_FILES[:2])} "
            f"({error}); delete it to download it again"
        ) from None
    return raw


def _extract(archive: Path, raw: Path) -> None:
    with zipfile.ZipFile(archive) as zipped:
        for name in RAW_FILES[:2]:
            if not (raw / name).is_file():
                partial = raw / f".{name}.part"
                with zipped.open(name) as source, open(partial, "wb") as target:
                    while chunk := source.read(1 << 20):
                        target.write(chunk)
                os.replace(partial, raw / name)


def _qm9pack_notes(how: dict[int, int]) -> tuple[str, ...]:
    return (
        "Source: qm9pack (the QM9 XYZ files). Bonds perceived by RDKit from the geometry, as "
        "the canonical SDF's were; PyG's graphs may still differ: other bond-order choices in "
        "conjugated rings (Kekule structures are not unique) and bonds its perception found "
        "or missed that RDKit's covalent radii do not. Positions keep the XYZ files' full "
        "precision (PyG's come from the SDF, rounded to 1e-4 Angstrom).",
        f"Bond orders taken from the SMILES for {how.get(ORDER_FROM_SMILES, 0)} molecules "
        "(no neutral assignment on the geometric graph) and left single for "
        f"{how.get(ORDER_SINGLE, 0)}.",
        _ZERO_COLUMNS,
    )


def _process(
    source: str, folder: Path, download: bool, workers: Optional[int], opener
) -> tuple[RawMolecules, tuple[str, ...], str]:
    """Parses the raw data of the first available source. Returns the molecules, their notes
    and the source used."""
    reasons = []
    if source in ("auto", "canonical"):
        raw = _canonical_folder(folder)
        if raw is not None:
            notes = ("Source: the canonical release (MoleculeNet's gdb9.sdf).", _ZERO_COLUMNS)
            return read_canonical(raw), notes, "canonical"
        reasons.append(f"no {', '.join(RAW_FILES)} in {folder} or {_download_folder(folder)}")
    if source in ("auto", "qm9pack"):
        package = qm9pack_folder()
        if package is not None and rdkit_available():
            molecules, how = read_qm9pack(package, workers=workers)
            _check_whole(package, molecules)
            return molecules, _qm9pack_notes(how), "qm9pack"
        missing = [n for n, ok in (("qm9pack", package), ("rdkit", rdkit_available())) if not ok]
        reasons.append(f"{' and '.join(missing)} not installed")
    if source in ("auto", "canonical") and download:
        try:
            raw = _download_canonical(folder, opener)
            notes = ("Source: the canonical release (MoleculeNet's gdb9.sdf).", _ZERO_COLUMNS)
            return read_canonical(raw), notes, "canonical"
        except OSError as err:
            reasons.append(f"download failed ({err})")
    urls = "\n".join(f"  {resource.url}" for resource in RESOURCES)
    raise DatasetNotFoundError(
        f"QM9 is not available ({'; '.join(reasons)}). Either install the offline source with "
        f"`pip install galfast[qm9]` (qm9pack and RDKit), or put {', '.join(RAW_FILES)} (the "
        f"first two inside qm9.zip) from\n{urls}\ninto {_download_folder(folder)}."
    )


def _check_whole(package: Path, molecules: RawMolecules) -> None:
    # A part file cut at a row boundary reads as valid rows: only the count shows it.
    if molecules.ids.size != QM9PACK_MOLECULES:
        raise ValueError(
            f"{package}: qm9pack's files hold {molecules.ids.size:,} molecules, not "
            f"{QM9PACK_MOLECULES:,}; reinstall qm9pack (pip install --force-reinstall qm9pack)"
        )


def _dataset(molecules: RawMolecules, notes: tuple[str, ...]) -> MoleculeDataset:
    arrays = pyg_features(molecules)
    y = torch.from_numpy(np.ascontiguousarray(molecules.targets, dtype=np.float32))
    return MoleculeDataset(
        name="qm9",
        x=torch.from_numpy(arrays.x),
        z=torch.from_numpy(molecules.atomic_numbers.astype(np.int64)),
        pos=torch.from_numpy(np.ascontiguousarray(molecules.positions, dtype=np.float32)),
        edge_index=torch.from_numpy(np.ascontiguousarray(arrays.edge_index)),
        edge_attr=torch.from_numpy(arrays.edge_attr),
        node_ptr=torch.from_numpy(molecules.atom_ptr.astype(np.int64)),
        edge_ptr=torch.from_numpy(arrays.edge_ptr),
        y=y,
        target_names=QM9_TARGETS,
        target_units=QM9_UNITS,
        ids=torch.from_numpy(molecules.ids.astype(np.int64)),
        attributes={"alpha": y[:, QM9_TARGETS.index("alpha")].clone()},
        license=LICENSE,
        notes=notes,
    )


def qm9(
    root: Optional[Union[str, Path]] = None,
    *,
    source: str = "auto",
    download: bool = True,
    workers: Optional[int] = None,
    opener: Callable[..., object] = urllib.request.urlopen,
) -> MoleculeDataset:
    """QM9 as a :class:`MoleculeDataset`, molecule for molecule as PyG's ``QM9``.

    Atom features (11): one-hot H, C, N, O, F; atomic number; aromatic, sp, sp2, sp3 (zero,
    as in PyG's QM9, see ``notes``); number of bonded hydrogens. Edge features (4): one-hot
    single, double, triple, aromatic bond, both directions of every bond. Targets (19, PyG's
    order and units): ``mu`` (D), ``alpha`` (bohr^3), HOMO, LUMO, gap (eV), ``r2`` (bohr^2),
    ZPVE, U0, U, H, G (eV), ``cv`` (cal/(mol K)), the four atomisation energies (eV) and the
    rotational constants A, B, C (GHz). ``attributes["alpha"]`` is the polarizability, the
    continuous sensitive attribute of the paper's QM9 runs.

    Sources, tried in this order with ``source="auto"``:

    1. a processed cache, ``qm9_<source>_v<version>.npz`` in the folder (written on first
       load; the canonical one preferred);
    2. ``"canonical"``: ``gdb9.sdf``, ``gdb9.sdf.csv`` and ``uncharacterized.txt`` (the
       release PyG downloads) in the folder or its ``raw/``;
    3. ``"qm9pack"``: offline, from the ``qm9pack`` package with bonds perceived by RDKit
       (``pip install galfast[qm9]``); 2.5 minutes on two busy CPU cores, once;
    4. ``"canonical"`` downloaded (when `download`) into ``raw/``, checked against the
       SHA-256 pinned on first download.

    Args:
        root: the folder (default ``$GALFAST_DATA/qm9`` or ``~/.cache/galfast/qm9``).
        source: ``"auto"``, ``"canonical"`` or ``"qm9pack"``.
        download: allow downloading the canonical release.
        workers: processes for RDKit's bond perception (default: all CPUs).
        opener: the URL opener (replaceable for mirrors and tests).

    Raises:
        DatasetNotFoundError: no source is available; the message says how to get one.

    Example:
        >>> ds = qm9()
        >>> len(ds), ds.num_node_features, ds.target_names[:2]
        (130831, 11, ('mu', 'alpha'))
    """
    if not (isinstance(source, str) and source in QM9_SOURCES):
        raise ValueError(f"source must be one of {QM9_SOURCES}: unknown QM9 source {source!r}")
    download = check_flag("download", download)  # download="no" is truthy: it downloaded
    # Up front: 2.5 failed in the process pool only after the qm9pack files were read.
    if workers is not None:
        workers = check_int("workers", workers, 1, 2**63)
    root, opener = check_root(root), check_opener(opener)
    folder = _folder(root)
    candidates = _PARSED_SOURCES if source == "auto" else (source,)
    for name in candidates:
        cached = load_cache(cache_path(folder, name))
        if cached is not None:
            return _dataset(*cached)
    start = time.perf_counter()
    molecules, notes, used = _process(source, folder, download, workers, opener)
    notes += (f"Processed once in {time.perf_counter() - start:.0f} s, cached in {folder}.",)
    save_cache(cache_path(folder, used), molecules, notes)
    return _dataset(molecules, notes)


def qm9_files(root: Optional[Union[str, Path]] = None) -> tuple[Path, ...]:
    """The files :func:`qm9` reads or writes for ``root`` (default: its cache folder), with
    any ``source``: the processed caches, the canonical raw files (where they are read, or
    where a download puts them, with the archive and the pinned hashes) and the installed
    qm9pack's CSVs. What a command writes must be none of these."""
    folder = _folder(check_root(root))
    raw = _canonical_folder(folder) or _download_folder(folder)
    downloads = [_download_folder(folder) / resource.filename for resource in RESOURCES]
    files = [cache_path(folder, name) for name in _PARSED_SOURCES]
    files += [raw / name for name in RAW_FILES]
    files += downloads + [pin_path(path) for path in downloads]
    package = qm9pack_folder()
    if package is not None:
        files += [package / name for name in QM9PACK_FILES]
    return tuple(dict.fromkeys(files))  # uncharacterized.txt is both raw and downloaded
