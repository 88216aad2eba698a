"""A copy of a torch.save file with one bit flipped inside a stored tensor: a damage torch.load
does not notice (it checks no CRC), for the tests of the readers that check it."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path


def flip_a_stored_bit(source: Path, target: Path) -> str:
    """Writes ``source`` to ``target`` with the first stored byte of its first tensor entry
    changed by one bit, and returns that entry's name."""
    raw = bytearray(source.read_bytes())
    with zipfile.ZipFile(source) as archive:
        entry = next(i for i in archive.infolist() if "/data/" in i.filename)
    header = entry.header_offset
    name_size, extra_size = struct.unpack("<HH", raw[header + 26 : header + 30])
    raw[header + 30 + name_size + extra_size] ^= 1
    target.write_bytes(raw)
    return entry.filename
