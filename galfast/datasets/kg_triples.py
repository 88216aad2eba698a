"""Reading knowledge-graph triple files (``head<TAB>relation<TAB>tail`` per line) into id arrays
over one entity and one relation vocabulary shared by the splits."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["RawTriples", "read_triple_file", "read_triple_splits", "tab_separated_lines"]


@dataclass(frozen=True)
class RawTriples:
    """The splits of a knowledge graph as ids.

    Attributes:
        entities: entity names, sorted; an entity's id is its position.
        relations: relation names, sorted; likewise.
        splits: ``split name -> [T, 3]`` int64 ``(head, relation, tail)`` ids, file line order.
    """

    entities: tuple[str, ...]
    relations: tuple[str, ...]
    splits: dict[str, np.ndarray]


def tab_separated_lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    """``(line number, fields)`` of every non-blank line of `path`, split at tabs, each field
    stripped of surrounding whitespace: a trailing space or a Windows line end would otherwise
    make ``"b "`` another entity than ``"b"``. A UTF-8 byte-order mark is dropped likewise.

    Raises:
        ValueError: the file is not UTF-8 text (the message gives the file and line).
    """
    # Undecodable bytes become lone surrogates, so each is reported on its own line rather than
    # in the 8 KiB chunk a strict decoder happens to fail on.
    with open(path, encoding="utf-8-sig", errors="surrogateescape") as stream:
        for number, line in enumerate(stream, start=1):
            if not line.isascii():  # the common case costs nothing
                _check_decoded(path, number, line)
            if line.strip():
                yield number, [field.strip() for field in line.split("\t")]


def _check_decoded(path: Path, number: int, line: str) -> None:
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as error:
        byte = ord(line[error.start]) - 0xDC00  # surrogateescape's code of the raw byte
        raise ValueError(
            f"{path}, line {number}: not UTF-8 text (byte 0x{byte:02x} at column {error.start + 1})"
        ) from None


def read_triple_file(path: Path) -> list[tuple[str, str, str]]:
    """The ``(head, relation, tail)`` names of `path` in line order; blank lines are skipped,
    surrounding whitespace of each field too (:func:`tab_separated_lines`).

    Raises:
        ValueError: a line has not exactly three tab-separated non-empty fields, or the file is
            not UTF-8 text (the message gives the file and line number).
    """
    rows = []
    for number, fields in tab_separated_lines(path):
        if len(fields) != 3 or not all(fields):
            raise ValueError(
                f"{path}, line {number}: expected 'head<TAB>relation<TAB>tail', got fields {fields}"
            )
        rows.append((fields[0], fields[1], fields[2]))
    return rows


def read_triple_splits(files: dict[str, Path]) -> RawTriples:
    """Reads every split and numbers entities and relations over all of them (sorted names, so
    the ids do not depend on file order). Plain dictionaries: numpy's unicode sort and search
    took seconds on FB15k-237.

    Raises:
        ValueError: a file is malformed (:func:`read_triple_file`) or holds no triples.
    """
    named = {split: read_triple_file(path) for split, path in files.items()}
    for split, rows in named.items():
        if not rows:
            raise ValueError(f"{files[split]} holds no triples (the {split} split is empty)")
    entities = sorted({name for rows in named.values() for h, _, t in rows for name in (h, t)})
    relations = sorted({r for rows in named.values() for _, r, _ in rows})
    entity_id = {name: i for i, name in enumerate(entities)}
    relation_id = {name: i for i, name in enumerate(relations)}
    splits = {
        split: np.fromiter(
            (i for h, r, t in rows for i in (entity_id[h], relation_id[r], entity_id[t])),
            dtype=np.int64,
            count=3 * len(rows),
        ).reshape(-1, 3)
        for split, rows in named.items()
    }
    return RawTriples(tuple(entities), tuple(relations), splits)
