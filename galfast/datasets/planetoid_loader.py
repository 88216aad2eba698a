"""Cora, CiteSeer and PubMed (Planetoid) with the public split, a link split and the document
class as the sensitive attribute."""

from __future__ import annotations

import urllib.request
import warnings
from pathlib import Path
from typing import Callable, Optional, Union

from galfast._args import check_flag, check_int
from galfast.datasets._generator_args import check_held_out
from galfast.datasets.bundled import BUNDLED_DIR, load_bundled
from galfast.datasets.download import (
    ChecksumError,
    DatasetNotFoundError,
    Resource,
    check_opener,
    check_root,
    data_dir,
    fetch,
    verify_file,
)
from galfast.datasets.graph_dataset import GraphDataset, build_graph_dataset
from galfast.datasets.planetoid_raw import (
    FEATURE_PARTS,
    STRUCTURE_PARTS,
    PlanetoidRaw,
    read_planetoid_raw,
)

__all__ = [
    "MissingFeaturesWarning",
    "PLANETOID_NAMES",
    "planetoid",
    "planetoid_files",
    "planetoid_resources",
]

PLANETOID_NAMES = ("cora", "citeseer", "pubmed")
PLANETOID_URL = "https://github.com/kimiyoung/planetoid/raw/master/data/"

LICENSE = (
    "Planetoid data (kimiyoung/planetoid, data/), Copyright (c) 2016 Zhilin Yang, MIT licence "
    "(full text in galfast/datasets/data/LICENSE-planetoid.txt). Cite Z. Yang, W. W. Cohen, "
    "R. Salakhutdinov, 'Revisiting Semi-Supervised Learning with Graph Embeddings', ICML 2016."
)

# SHA-256 of each raw file, computed from verified copies of kimiyoung/planetoid's data/.
# ind.pubmed.allx: no copy here; its hash is the one ../shared/data/README publishes.
_SHA256 = {
    ("cora", "allx"): "9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543",
    ("cora", "ally"): "2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71",
    ("cora", "graph"): "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d",
    ("cora", "test.index"): "297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875",
    ("cora", "tx"): "b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a",
    ("cora", "ty"): "41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad",
    ("cora", "y"): "94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1",
    ("citeseer", "allx"): "2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668",
    ("citeseer", "ally"): "f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95",
    ("citeseer", "graph"): "d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7",
    ("citeseer", "test.index"): "2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4",
    ("citeseer", "tx"): "539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21",
    ("citeseer", "ty"): "55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce",
    ("citeseer", "y"): "8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924",
    ("pubmed", "allx"): "508e538e2abdccdd54c4d3e9f49d638b4af7107d85845f66ddea5a5152658b7e",
    ("pubmed", "ally"): "0c37bbe3b5014ec365e9d393cf4791925e5ed94fb194305d74f064a8d7b50f0e",
    ("pubmed", "graph"): "5b89f0036ca22909471f1e6558eb42fa06e0c730a577bde5b058b40638f81dc9",
    ("pubmed", "test.index"): "b101d421688bbaecbd82e8a18f1e282378d6830f3a37666f28ebc47f844341b5",
    ("pubmed", "tx"): "4eb5f5d0f30f26497eb0ac6ac9719d09c67e284f1ed0385c93f3ef27a671da3d",
    ("pubmed", "ty"): "ee2e0d4819d9fbcc403689c3bf2e49face401b605932f093bc58ab6461130fdd",
    ("pubmed", "y"): "e6c807633307a07ed659249006536a147c7999c797f11a2560752990181b41b3",
}


class MissingFeaturesWarning(UserWarning):
    """A Planetoid dataset was loaded structure-only because a feature file is unavailable."""


def planetoid_resources(name: str) -> dict[str, Resource]:
    """``part -> Resource`` for the raw files the loader reads (``x`` is not needed: its rows
    are the first rows of ``allx``)."""
    return {
        part: Resource(
            PLANETOID_URL + f"ind.{name}.{part}", f"ind.{name}.{part}", _SHA256[(name, part)]
        )
        for part in STRUCTURE_PARTS + FEATURE_PARTS
    }


def _has(folder: Path, name: str, parts: tuple[str, ...]) -> bool:
    return all((folder / f"ind.{name}.{part}").is_file() for part in parts)


def _from_root(root: Path, name: str) -> Path:
    for folder in (root, root / "planetoid"):
        if _has(folder, name, STRUCTURE_PARTS):
            return folder
    files = ", ".join(f"ind.{name}.{part}" for part in STRUCTURE_PARTS + FEATURE_PARTS)
    raise DatasetNotFoundError(
        f"no {name} Planetoid files under {root} (or {root / 'planetoid'}): expected {files} "
        f"from {PLANETOID_URL}"
    )


def _checked_name(name: object) -> str:
    """``name`` in lower case; ValueError for a name that is not a Planetoid dataset's."""
    if not (isinstance(name, str) and name.lower() in PLANETOID_NAMES):  # None had no .lower
        raise ValueError(
            f"name must be one of {PLANETOID_NAMES}: unknown Planetoid dataset {name!r}"
        )
    return name.lower()


def _source(name: str, root: Optional[Path]) -> tuple[str, Path]:
    """Where :func:`planetoid` reads ``name`` from: ``("root", folder)`` for a ``root``,
    ``("cache", folder)`` when the download cache holds every raw file, ``("bundled", file)``
    for Cora, else ``("download", folder)``: the cache, where the missing files are fetched.
    Raises DatasetNotFoundError when ``root`` holds no copy."""
    if root is not None:
        return "root", _from_root(root, name)
    cache = data_dir() / "planetoid"
    if _has(cache, name, STRUCTURE_PARTS + FEATURE_PARTS):
        return "cache", cache
    if name == "cora":
        return "bundled", BUNDLED_DIR / "cora.npz"
    return "download", cache


def planetoid_files(name: str, root: Optional[Union[str, Path]] = None) -> tuple[Path, ...]:
    """The files ``planetoid(name, root)`` reads: the bundled copy, or every raw file's path in
    the folder it reads them from (a feature file it lacks too: one put there is read next
    time), and the set's ``x``, which it does not read (its rows are ``allx``'s first) but
    which other tools (PyG's Planetoid) do. What a command writes must be none of these.
    Raises as :func:`planetoid` does for an unknown ``name`` or a ``root`` without the files."""
    name = _checked_name(name)
    source, where = _source(name, check_root(root))
    if source == "bundled":
        return (where,)
    read = [where / resource.filename for resource in planetoid_resources(name).values()]
    return (*read, where / f"ind.{name}.x")


def _from_cache(
    name: str, download: bool, opener: Callable[..., object]
) -> tuple[Path, dict[str, str]]:
    """Fetches the missing raw files into the cache. Returns the folder and, per file that
    could not be had, why."""
    folder = data_dir() / "planetoid"
    failed = {}
    for part, resource in planetoid_resources(name).items():
        if (folder / resource.filename).is_file():
            continue
        if not download:
            failed[part] = "download=False"
            continue
        try:
            fetch(resource, folder, opener=opener)
        except OSError as err:
            failed[part] = str(err)
    missing = [part for part in STRUCTURE_PARTS if part in failed]
    if missing:
        urls = "\n".join(
            f"  {PLANETOID_URL}ind.{name}.{part}  ({failed[part]})" for part in missing
        )
        raise DatasetNotFoundError(
            f"{name} is not on this machine and could not be downloaded. Put these files into "
            f"{folder}/ (or set GALFAST_DATA to a folder with a planetoid/ subfolder holding "
            f"them):\n{urls}"
        )
    return folder, failed


def _check_cached(folder: Path, name: str, download: bool) -> None:
    """Checks each of ``name``'s raw files in the download cache against its SHA-256 (a few MB
    to hash): a file cut short or edited there would fail later as an unpickling error, or
    load as other data. Raises ChecksumError naming the file and what to do."""
    for resource in planetoid_resources(name).values():
        path = folder / resource.filename
        if not path.is_file():
            continue
        try:
            verify_file(path, resource)
        except ChecksumError:
            again = (
                "delete it and galfast downloads it again"
                if download
                else "delete it and load with download=True to fetch it again"
            )
            raise ChecksumError(
                f"{path} in galfast's download cache is damaged or edited (its SHA-256 is not "
                f"that of {resource.url}): {again}, or put an intact copy there. A copy of "
                "another release belongs in a folder passed as root, which is read as it is."
            ) from None


def _notes(name: str, raw: PlanetoidRaw, missing_features: str) -> tuple[str, ...]:
    notes = []
    if raw.features is None:
        notes.append(
            f"{name} is structure-only: {missing_features}; x is None, use a learned node "
            "embedding (labels, graph and splits are complete)."
        )
    unknown = int((raw.labels < 0).sum())
    if unknown:
        notes.append(
            f"{unknown} nodes in the test id range have no feature row and no label in the raw "
            "files: zero features, y = -1, not in attribute_nodes."
        )
    return tuple(notes)


def planetoid(
    name: str = "cora",
    root: Optional[Union[str, Path]] = None,
    seed: int = 0,
    *,
    val_fraction: float = 0.05,
    test_fraction: float = 0.1,
    download: bool = True,
    opener: Callable[..., object] = urllib.request.urlopen,
) -> GraphDataset:
    """Cora, CiteSeer or PubMed from the original Planetoid raw files.

    Features are the raw ones (binary bag of words for Cora/CiteSeer, TF-IDF for PubMed, not
    normalised), ``y`` is the document class, which is also the sensitive attribute
    ``attributes["class"]``. The node split is the public one (the first 20 per class for
    training, the next 500 for validation, the 1,000 ``test.index`` nodes for test). The link
    split holds out ``val_fraction`` / ``test_fraction`` of the undirected edges with as many
    sampled non-edges (PyG ``RandomLinkSplit`` defaults); its graph keeps training edges only.

    Where the data comes from: ``root`` if given (a folder holding ``ind.<name>.*`` or a
    ``planetoid/`` subfolder that does); else the cache (``$GALFAST_DATA/planetoid`` or
    ``~/.cache/galfast/planetoid``) when complete; else, for Cora, the copy bundled with
    galfast; else the files are downloaded into the cache and verified against their SHA-256.
    Files already in the cache are verified against the same SHA-256 each load (a
    :class:`~galfast.datasets.download.ChecksumError` names a damaged or edited one, to delete).
    Files under ``root`` are read as they are (they may be another release): a damaged pickle
    fails to parse, by name, but an edited one is not detected. If a feature file
    (``allx``, ``tx``) cannot be had, the dataset loads structure-only: ``x is None``, a note in
    ``notes`` and a :class:`MissingFeaturesWarning`.

    Args:
        name: ``"cora"``, ``"citeseer"`` or ``"pubmed"``.
        root: a local copy of the raw files.
        seed: seeds the link split.
        val_fraction, test_fraction: shares of edges held out for link prediction.
        download: allow downloads (otherwise missing files raise / drop the features).
        opener: the URL opener (``urllib.request.urlopen``; replaceable for mirrors and tests).

    Raises:
        DatasetNotFoundError: a structure file is unavailable; the message lists the files,
            their URLs and where to put them.
        ChecksumError: a file in the cache is not the published one.

    Example:
        >>> ds = planetoid("cora")          # offline: the bundled copy
        >>> ds.num_nodes, ds.num_features, ds.num_classes
        (2708, 1433, 7)
    """
    name = _checked_name(name)
    download = check_flag("download", download)  # download="no" is truthy: it downloaded
    # Before any file is read: the link split is drawn last.
    seed, root, opener = check_int("seed", seed, 0), check_root(root), check_opener(opener)
    val_fraction, test_fraction = check_held_out(val_fraction, test_fraction)
    missing_features = ""
    source, where = _source(name, root)
    if source == "root":
        raw = read_planetoid_raw(where, name)
        absent = [f"ind.{name}.{part}" for part in FEATURE_PARTS if not _has(where, name, (part,))]
        missing_features = f"{', '.join(absent)} not in {where}"
    elif source == "cache":
        _check_cached(where, name, download)
        raw = read_planetoid_raw(where, name)
    elif source == "bundled":
        raw = load_bundled(where)
    else:
        folder, failed = _from_cache(name, download, opener)
        _check_cached(folder, name, download)
        raw = read_planetoid_raw(folder, name)
        missing_features = "; ".join(
            f"ind.{name}.{p} unavailable ({why})" for p, why in failed.items()
        )
    notes = _notes(name, raw, missing_features)
    if raw.features is None:
        warnings.warn(notes[0], MissingFeaturesWarning, stacklevel=2)
    labelled = (raw.labels >= 0).nonzero()[0]
    return build_graph_dataset(
        name=name,
        pairs=raw.pairs,
        num_nodes=raw.num_nodes,
        x=None if raw.features is None else raw.features.toarray(),
        y=raw.labels,
        num_classes=raw.num_classes,
        split=(raw.train_index, raw.val_index, raw.test_index),
        attributes={"class": raw.labels[labelled]},
        attribute_classes={"class": tuple(f"class {c}" for c in range(raw.num_classes))},
        attribute_nodes=labelled,
        license=LICENSE,
        notes=notes,
        seed=seed,
        val_fraction=val_fraction,
        test_fraction=test_fraction,
    )
