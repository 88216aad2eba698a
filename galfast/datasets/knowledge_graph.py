"""FB15k-237 and WN18RR: the triples from CompGCN's archives and the sensitive entity
attributes of the paper's runs (FB15k-237 entity types, WN18RR part of speech and word sense)."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Callable, Optional, Union

from galfast._args import check_flag
from galfast.datasets.download import (
    DatasetNotFoundError,
    Resource,
    check_opener,
    check_root,
    data_dir,
    extract_zip,
    fetch,
    verify_file,
)
from galfast.datasets.kg_attributes import (
    check_sense_cap,
    check_type_options,
    entity_types,
    pos_and_sense,
)
from galfast.datasets.kg_triples import read_triple_splits
from galfast.datasets.knowledge_graph_dataset import (
    KnowledgeGraphDataset,
    build_knowledge_graph_dataset,
)

__all__ = ["KG_NAMES", "fb15k_237", "knowledge_graph_files", "wn18rr"]

KG_NAMES = ("fb15k-237", "wn18rr")
SPLITS = ("train", "valid", "test")

# CompGCN's archives at a fixed commit, so the bytes behind the URL cannot change.
COMPGCN_URL = (
    "https://github.com/malllabiisc/CompGCN/raw/3b06f5fec42526faa81afc158df9e64a8382982c/"
    "data_compressed/"
)
_ARCHIVE = {"fb15k-237": "FB15k-237", "wn18rr": "WN18RR"}  # the zip's name and top folder

# SHA-256 of the archives and of every file the loaders read, computed from CompGCN's zips at
# the commit above (whose extracted files equal ../shared/data's copies) and from the shared
# copies of the attribute files, which have no canonical download.
_SHA256 = {
    (
        "fb15k-237",
        "FB15k-237.zip",
    ): "1d897ef464a2e79a2bbf3c4f6cf771d9ce44b53cc8409836ba9c574fde1401b3",
    ("fb15k-237", "train.txt"): "6e4c2782169af21e9743f3b1d200886f5d595bf6bc504ec1351720949c5cdfae",
    ("fb15k-237", "valid.txt"): "cf6309010852f6a8d47a45df830a426415d1ee6f7a3970a8376ff1fb81db4a5c",
    ("fb15k-237", "test.txt"): "5711cf41623ceb4eacc50eb6108a3ca6565c7492e3caaf82a3e355cc660d1574",
    ("fb15k-237", "entity_types/Entity_Type_train.txt"): (
        "49819965651b3c17a932e6b0d1a7608120a9ec3df6af123f363a9d531cd6433f"
    ),
    ("wn18rr", "WN18RR.zip"): "699d45542a94c94ae95726546a65009270358642fcb6b39217baabe9bc1720bf",
    ("wn18rr", "train.txt"): "038612e783c215ee5f3ca9fbfca27b8d0739be1028fe4ee7c174aecf0b83d5df",
    ("wn18rr", "valid.txt"): "453ce7202afa58094a04d2b1560ee2b02660f1c260b32ce6651c8ccedd1028ab",
    ("wn18rr", "test.txt"): "0383bceaaa1096cf3c03ec021ed0048068e2355dbfc0239b292cefdac821cec5",
    ("wn18rr", "entity_pos_sense.tsv"): (
        "36f472e5fd809e268ef403d6e1c68606f38b3e057abde105b3a241a7ed4547bb"
    ),
}

# The attribute file of each dataset (path inside its folder) and where it comes from.
_ATTRIBUTE_FILE = {
    "fb15k-237": (
        "entity_types/Entity_Type_train.txt",
        "the FB15k entity types GAL reads ('mid<TAB>/type/path'): TKRL's entity2type.txt "
        "(thunlp/TKRL) less /common/topic, bare /m/ types and every pair of the valid/test "
        "files of cmoon2/knowledge_graph",
    ),
    "wn18rr": (
        "entity_pos_sense.tsv",
        "per WN18RR entity its WordNet name, part of speech and sense number "
        "('id name POS_tag sense'), built from Princeton WordNet 3.0",
    ),
}

LICENSE = {
    "fb15k-237": (
        "FB15k-237 (Toutanova & Chen 2015, from Freebase, CC-BY) as distributed in CompGCN's "
        "data_compressed/FB15k-237.zip (malllabiisc/CompGCN, Apache-2.0); entity types from "
        "TKRL (thunlp/TKRL, MIT; Freebase, CC-BY) and cmoon2/knowledge_graph (Moon et al. 2017)."
    ),
    "wn18rr": (
        "WN18RR (Dettmers et al. 2018, from WordNet 3.0, WordNet licence) as distributed in "
        "CompGCN's data_compressed/WN18RR.zip (malllabiisc/CompGCN, Apache-2.0); part of speech "
        "and sense numbers from Princeton WordNet 3.0 (WordNet licence)."
    ),
}


def _archive(name: str) -> Resource:
    """CompGCN's archive of the dataset's triples."""
    filename = f"{_ARCHIVE[name]}.zip"
    return Resource(COMPGCN_URL + filename, filename, _SHA256[(name, filename)])


def _triples_folder(folder: Path, name: str) -> Optional[Path]:
    """Where the split files are: `folder` itself (the shared layout) or the archive's top
    folder inside it (the cache layout)."""
    for candidate in (folder, folder / _ARCHIVE[name]):
        if all((candidate / f"{split}.txt").is_file() for split in SPLITS):
            return candidate
    return None


def _dataset_folder(root: Path, name: str) -> tuple[Path, Path]:
    """The dataset folder under a user's `root` and its triples folder."""
    for folder in (root, root / name, root / _ARCHIVE[name]):
        triples = _triples_folder(folder, name)
        if triples is not None:
            return folder, triples
    raise DatasetNotFoundError(
        f"no {name} triples under {root}: expected train.txt, valid.txt and test.txt in "
        f"{root}, {root / name} or {root / _ARCHIVE[name]} (CompGCN's {COMPGCN_URL}"
        f"{_ARCHIVE[name]}.zip holds them)"
    )


def _cache_folder(name: str) -> Path:
    """The cache's dataset folder: the archive is downloaded into it and unpacked there."""
    return data_dir() / name


def _cached_folder(name: str, download: bool, opener: Callable[..., object]) -> tuple[Path, Path]:
    """The cache's dataset folder, downloading and unpacking the archive into it if needed."""
    folder = _cache_folder(name)
    triples = _triples_folder(folder, name)
    if triples is not None:
        return folder, triples
    archive = _archive(name)
    if not download:
        why = "download=False"
    else:
        try:
            extract_zip(fetch(archive, folder, opener=opener), folder, _ARCHIVE[name])
            return folder, folder / _ARCHIVE[name]
        except OSError as error:
            why = str(error)
    raise DatasetNotFoundError(
        f"{name} is not on this machine and could not be downloaded ({why}). Put {archive.url} "
        f"into {folder}/ (or its train/valid/test.txt there), or pass root= / set GALFAST_DATA "
        f"to a folder with a {name}/ subfolder holding them."
    )


def _verified(path: Path, name: str, key: str) -> Path:
    """`path` after checking it against the SHA-256 of the dataset's file `key`."""
    relative, origin = _ATTRIBUTE_FILE[name]
    source = origin if key == relative else _archive(name).url
    verify_file(path, Resource(source, key, _SHA256[(name, key)]))
    return path


def _attribute_location(folder: Path, triples: Path, name: str) -> Path:
    """Where the attribute file of ``name`` is read from, present or not: in the dataset
    ``folder``, unless only the ``triples`` folder inside it holds one."""
    relative = _ATTRIBUTE_FILE[name][0]
    if not (folder / relative).is_file() and (triples / relative).is_file():
        return triples / relative
    return folder / relative


def _attribute_path(folder: Path, triples: Path, name: str) -> Path:
    """The attribute file of ``name``: in the dataset ``folder``, or beside the ``triples``
    where those sit in a subfolder of it (``root/WN18RR/``, as the docstrings allow)."""
    relative, origin = _ATTRIBUTE_FILE[name]
    path = _attribute_location(folder, triples, name)
    if not path.is_file():
        raise DatasetNotFoundError(
            f"{name}'s sensitive attributes need {path}: {origin} (SHA-256 "
            f"{_SHA256[(name, relative)]}). No canonical download exists; place a copy there "
            "(the development copy is ../shared/data/), or load the triples alone with "
            "attributes=False."
        )
    return _verified(path, name, relative)


def _load(
    name: str,
    root: Optional[Union[str, Path]],
    download: bool,
    opener: Callable[..., object],
) -> tuple[Path, dict[str, Path]]:
    download = check_flag("download", download)  # download="no" is truthy: it downloaded
    root, opener = check_root(root), check_opener(opener)
    if root is not None:
        folder, triples = _dataset_folder(root, name)
    else:
        folder, triples = _cached_folder(name, download, opener)
    files = {split: _verified(path, name, path.name) for split, path in _splits(triples).items()}
    return folder, files


def _splits(triples: Path) -> dict[str, Path]:
    return {split: triples / f"{split}.txt" for split in SPLITS}


def knowledge_graph_files(name: str, root: Optional[Union[str, Path]] = None) -> tuple[Path, ...]:
    """The files the loader of ``name`` (``"fb15k-237"`` or ``"wn18rr"``) reads from ``root``:
    the triples of each split and the attribute file (where one put there would be read, when
    it is absent), and in the cache also the archive it downloads and unpacks there. What a
    command writes must be none of these. Raises as the loader does for a ``root`` without
    the triples."""
    if not (isinstance(name, str) and name in KG_NAMES):  # a list was unhashable
        raise ValueError(f"name must be one of {KG_NAMES}: unknown knowledge graph {name!r}")
    root = check_root(root)
    if root is not None:
        folder, triples = _dataset_folder(root, name)
        downloaded = ()
    else:
        folder = _cache_folder(name)
        triples = _triples_folder(folder, name) or folder / _ARCHIVE[name]
        downloaded = (folder / _archive(name).filename,)
    return (*_splits(triples).values(), _attribute_location(folder, triples, name), *downloaded)


def wn18rr(
    root: Optional[Union[str, Path]] = None,
    *,
    sense_cap: int = 20,
    attributes: bool = True,
    download: bool = True,
    opener: Callable[..., object] = urllib.request.urlopen,
) -> KnowledgeGraphDataset:
    """WN18RR (40,943 entities, 11 relations, 86,835 / 3,034 / 3,134 triples) with the
    entities' part of speech and word sense as sensitive attributes.

    Attributes (both categorical, known on every entity with a row in
    ``entity_pos_sense.tsv``): ``pos``, 4 classes ``JJ, NN, RB, VB``; ``sense``, the WordNet
    sense number with every sense ``>= sense_cap`` in one class (GAL's ``min(sense, 20) - 1``:
    classes ``sense 1`` .. ``sense 19``, ``sense >= 20``).

    Where the data comes from: ``root`` if given (a folder holding ``train.txt``,
    ``valid.txt``, ``test.txt``, directly or in a ``wn18rr/`` or ``WN18RR/`` subfolder, and
    ``entity_pos_sense.tsv`` beside them); else the cache ``$GALFAST_DATA/wn18rr`` (default
    ``~/.cache/galfast/wn18rr``), where CompGCN's ``WN18RR.zip`` is downloaded and unpacked
    when the triples are missing. Every file read is checked against its SHA-256. The
    attribute file has no canonical download: it must be placed in the dataset folder.

    Args:
        root: a local copy.
        sense_cap: senses ``>= sense_cap`` share one class (``sense_cap`` classes in all).
        attributes: read the attribute file (False: triples only, no attributes).
        download: allow downloading the archive into the cache.
        opener: the URL opener (``urllib.request.urlopen``; replaceable for mirrors and tests).

    Raises:
        DatasetNotFoundError: a file is unavailable; the message says which and where to put it.
        ChecksumError: a file differs from the published one.

    Example:
        >>> ds = wn18rr(root="../shared/data")
        >>> ds.num_entities, ds.num_relations, len(ds.attribute_classes["sense"])
        (40943, 11, 20)
    """
    # Before the triples are read: they were checked only when the attribute file was read.
    sense_cap, attributes = check_sense_cap(sense_cap), check_flag("attributes", attributes)
    folder, files = _load("wn18rr", root, download, opener)
    raw = read_triple_splits(files)
    found, notes = {}, ()
    if attributes:
        path = _attribute_path(folder, files["train"].parent, "wn18rr")
        found, missing = pos_and_sense(path, raw.entities, sense_cap)
        if missing:
            notes = (
                f"{missing} entities have no part-of-speech / sense row: not in the attribute.",
            )
    return build_knowledge_graph_dataset(
        name="wn18rr",
        entities=raw.entities,
        relations=raw.relations,
        splits=raw.splits,
        attributes=found,
        license=LICENSE["wn18rr"],
        notes=notes,
    )


def fb15k_237(
    root: Optional[Union[str, Path]] = None,
    *,
    top_types: int = 50,
    types_known: str = "top",
    attributes: bool = True,
    download: bool = True,
    opener: Callable[..., object] = urllib.request.urlopen,
) -> KnowledgeGraphDataset:
    """FB15k-237 (14,541 entities, 237 relations, 272,115 / 17,535 / 20,466 triples) with the
    entities' most frequent Freebase types as a multi-label sensitive attribute.

    Attribute ``types`` (multilabel, ``[K, top_types]`` 0/1): which of the ``top_types`` most
    frequent types of ``entity_types/Entity_Type_train.txt`` an entity has, columns by count.
    ``types_known`` says on which entities it is known: ``"top"`` (default) those with at least
    one of these types (13,060); ``"typed"`` those with any type (14,408; all-zero rows for
    the rest); ``"all"`` every entity, as GAL's code does (all-zero rows for untyped ones).

    Where the data comes from: as :func:`wn18rr`, with the folder ``fb15k-237`` (or
    ``FB15k-237``), CompGCN's ``FB15k-237.zip``, and the attribute file at
    ``entity_types/Entity_Type_train.txt`` inside the dataset folder.

    Args:
        root: a local copy.
        top_types: how many of the most frequent types are labels.
        types_known: ``"top"``, ``"typed"`` or ``"all"`` (see above).
        attributes: read the attribute file (False: triples only, no attributes).
        download: allow downloading the archive into the cache.
        opener: the URL opener (``urllib.request.urlopen``; replaceable for mirrors and tests).

    Raises:
        DatasetNotFoundError: a file is unavailable; the message says which and where to put it.
        ChecksumError: a file differs from the published one.

    Example:
        >>> ds = fb15k_237(root="../shared/data")
        >>> ds.attributes["types"].shape
        torch.Size([13060, 50])
    """
    top_types, types_known = check_type_options(top_types, types_known)
    attributes = check_flag("attributes", attributes)
    folder, files = _load("fb15k-237", root, download, opener)
    raw = read_triple_splits(files)
    found, notes = {}, ()
    if attributes:
        path = _attribute_path(folder, files["train"].parent, "fb15k-237")
        found, counts = entity_types(path, raw.entities, top_types, types_known)
        notes = (
            f"{counts['typed']} of {len(raw.entities)} entities have a type, {counts['top']} one "
            f"of the {top_types} most frequent; 'types' is known on "
            f"{found['types'][3].size} (types_known={types_known!r}).",
        )
    return build_knowledge_graph_dataset(
        name="fb15k-237",
        entities=raw.entities,
        relations=raw.relations,
        splits=raw.splits,
        attributes=found,
        license=LICENSE["fb15k-237"],
        notes=notes,
    )
