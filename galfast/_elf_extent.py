"""How many bytes an ELF shared library's own headers say it spans: a `_C` cut short (a disk
that filled during the install, an interrupted copy) is mapped anyway by the dynamic loader,
and the first touch of a page past its end kills the interpreter with SIGBUS instead of
raising an ImportError. Comparing this extent with the file's size catches it first."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import NamedTuple, Optional

__all__ = ["elf_extent"]


class _Layout(NamedTuple):
    """Where an ELF class (32- or 64-bit) keeps what the extent needs (the ELF specification's
    file and program headers)."""

    word: str  # struct code of an address-sized field
    table_offsets_at: int  # e_phoff, then e_shoff
    table_sizes_at: int  # e_phentsize, e_phnum, e_shentsize, e_shnum (16 bits each)
    segment_offset_at: int  # p_offset within a program header
    segment_size_at: int  # p_filesz within a program header


_LAYOUTS = {1: _Layout("I", 0x1C, 0x2A, 0x04, 0x10), 2: _Layout("Q", 0x20, 0x36, 0x08, 0x20)}
_BYTE_ORDERS = {1: "<", 2: ">"}
_HEADER_BYTES = 0x40  # the 64-bit file header; the 32-bit one is shorter


def elf_extent(path: Path) -> Optional[int]:
    """The end, in bytes, of the furthest of the file header, the program and section header
    tables and the segments' file contents; None where ``path`` is not an ELF file (another
    platform's library: nothing to check)."""
    with open(path, "rb") as f:
        header = f.read(_HEADER_BYTES)
        if len(header) < 6 or header[:4] != b"\x7fELF":
            return None
        layout, order = _LAYOUTS.get(header[4]), _BYTE_ORDERS.get(header[5])
        if layout is None or order is None:
            return None
        if len(header) < layout.table_sizes_at + 8:
            return layout.table_sizes_at + 8  # the file header itself is cut short
        phoff, shoff = struct.unpack_from(order + layout.word * 2, header, layout.table_offsets_at)
        phentsize, phnum, shentsize, shnum = struct.unpack_from(
            order + "HHHH", header, layout.table_sizes_at
        )
        extent = max(len(header), phoff + phentsize * phnum, shoff + shentsize * shnum)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    if len(table) < phentsize * phnum:
        return extent  # the program headers are past the end: the extent already says so
    for k in range(phnum):
        entry = k * phentsize
        (start,) = struct.unpack_from(order + layout.word, table, entry + layout.segment_offset_at)
        (size,) = struct.unpack_from(order + layout.word, table, entry + layout.segment_size_at)
        extent = max(extent, start + size)
    return extent
