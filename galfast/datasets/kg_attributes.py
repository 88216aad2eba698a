"""The sensitive entity attributes of the paper's knowledge-graph runs, read from their files:
WN18RR part of speech and word sense, FB15k-237 entity types (multi-label)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from galfast._args import check_choice, check_int
from galfast.datasets.kg_triples import tab_separated_lines

__all__ = [
    "MAX_SENSE_CAP",
    "POS_TAGS",
    "TYPES_KNOWN",
    "check_sense_cap",
    "check_type_options",
    "entity_types",
    "pos_and_sense",
]

# GAL's order of the WordNet part-of-speech tags (adjective, noun, adverb, verb).
POS_TAGS = ("JJ", "NN", "RB", "VB")

# On which entities the entity-type attribute counts as known.
TYPES_KNOWN = ("top", "typed", "all")

# What a loader returns per attribute: (kind, values, class names, entity ids).
Attribute = tuple[str, np.ndarray, tuple[str, ...], np.ndarray]


def _entity_ids(entities: tuple[str, ...], names: list[str]) -> np.ndarray:
    """Ids of `names` in `entities`, -1 where a name is not an entity."""
    entity_id = {name: i for i, name in enumerate(entities)}
    return np.fromiter((entity_id.get(name, -1) for name in names), np.int64, count=len(names))


# Beyond the largest sense number (51 in WN18RR's file) a cap only adds empty classes; 10**9
# built a billion class names.
MAX_SENSE_CAP = 1000


def check_sense_cap(sense_cap: Any) -> int:
    """``sense_cap`` as an int in ``[2, MAX_SENSE_CAP]`` (NumPy's ints too)."""
    return check_int("sense_cap", sense_cap, 2, MAX_SENSE_CAP + 1)


def check_type_options(top: Any, known: Any) -> tuple[int, str]:
    """``top_types`` as a positive int (NumPy's too) and ``types_known`` one of
    :data:`TYPES_KNOWN`."""
    known = check_choice("types_known", known, TYPES_KNOWN)  # a list was unhashable
    return check_int("top_types", top, 1), known


def pos_and_sense(
    path: Path, entities: tuple[str, ...], sense_cap: int
) -> tuple[dict[str, Attribute], int]:
    """``pos`` (4 classes, :data:`POS_TAGS`) and ``sense`` (``sense_cap`` classes: senses
    ``1 .. sense_cap - 1``, then every sense ``>= sense_cap`` in one class, GAL's
    ``min(sense, 20) - 1``) from ``entity_pos_sense.tsv`` (header ``id name POS_tag sense``).

    Returns the attributes and the number of entities without a row. Rows of ids that are not
    entities of the graph are ignored.

    Raises:
        ValueError: a malformed row, an unknown tag, a sense below 1 or an id given twice.
    """
    sense_cap = check_sense_cap(sense_cap)
    ids, tags, senses = [], [], []
    lines = tab_separated_lines(path)
    header = next(lines, (1, []))[1]
    if header != ["id", "name", "POS_tag", "sense"]:
        raise ValueError(f"{path}: expected the header 'id name POS_tag sense', got {header}")
    for number, fields in lines:
        # isdecimal, not isdigit: "²" is a digit that int() refuses.
        well_formed = len(fields) == 4 and all(fields) and fields[3].isdecimal()
        if not well_formed or fields[2] not in POS_TAGS:
            raise ValueError(f"{path}, line {number}: malformed row {fields}")
        if int(fields[3]) < 1:
            raise ValueError(f"{path}, line {number}: sense numbers start at 1")
        ids.append(fields[0])
        tags.append(POS_TAGS.index(fields[2]))
        senses.append(min(int(fields[3]), sense_cap))  # capped here: any size fits int64
    repeated = next((i for i, count in Counter(ids).items() if count > 1), None)
    if repeated is not None:
        raise ValueError(f"{path} lists entity {repeated!r} twice")
    node = _entity_ids(entities, ids)
    keep = node >= 0
    order = np.argsort(node[keep])
    nodes = node[keep][order]
    pos = np.asarray(tags, dtype=np.int64)[keep][order]
    sense = np.asarray(senses, dtype=np.int64)[keep][order] - 1
    sense_classes = tuple(f"sense {s}" for s in range(1, sense_cap)) + (f"sense >= {sense_cap}",)
    attributes = {
        "pos": ("categorical", pos, POS_TAGS, nodes),
        "sense": ("categorical", sense, sense_classes, nodes),
    }
    return attributes, len(entities) - nodes.size


def entity_types(
    path: Path, entities: tuple[str, ...], top: int, known: str
) -> tuple[dict[str, Attribute], dict[str, int]]:
    """``types``: the multi-label set of the `top` most frequent types of ``path``
    (``Entity_Type_train.txt``, ``mid<TAB>/type/path`` per line), columns ordered by count,
    then by name. Each (entity, type) pair counts once.

    `known` says where the attribute is known: ``"top"`` on entities with at least one of the
    `top` types; ``"typed"`` on entities with any type in the file (all-zero rows for those with
    none of the `top`); ``"all"`` on every entity (GAL's code: all-zero rows for the rest).

    Returns the attribute and counts for the notes (``typed``, ``top``: entities with any /
    a top type).
    """
    top, known = check_type_options(top, known)
    pairs = set()
    for number, fields in tab_separated_lines(path):
        if len(fields) != 2 or not all(fields):
            raise ValueError(f"{path}, line {number}: expected 'mid<TAB>type', got fields {fields}")
        pairs.add((fields[0], fields[1]))
    counts = Counter(kind for _, kind in pairs)
    if len(counts) < top:
        raise ValueError(f"{path} has {len(counts)} types, fewer than top_types={top}")
    ranked = sorted(counts, key=lambda kind: (-counts[kind], kind))[:top]
    column = {kind: c for c, kind in enumerate(ranked)}
    labels = np.zeros((len(entities), top), dtype=np.int64)
    typed = np.zeros(len(entities), dtype=bool)
    listed = sorted(pairs)
    rows = _entity_ids(entities, [mid for mid, _ in listed])
    for row, (_, kind) in zip(rows.tolist(), listed):
        if row < 0:
            continue
        typed[row] = True
        if kind in column:
            labels[row, column[kind]] = 1
    has_top = labels.any(axis=1)
    mask = {"top": has_top, "typed": typed, "all": np.ones(len(entities), dtype=bool)}[known]
    nodes = np.flatnonzero(mask).astype(np.int64)
    attribute = ("multilabel", labels[nodes], tuple(ranked), nodes)
    return {"types": attribute}, {"typed": int(typed.sum()), "top": int(has_top.sum())}
