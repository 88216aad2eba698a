"""Loads the compiled extension with a message that says what is wrong when it cannot."""

from __future__ import annotations

import importlib.machinery
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, Optional

from galfast._elf_extent import elf_extent
from galfast._startup import is_the_command_line

PACKAGE_DIR = Path(__file__).resolve().parent


def has_extension(package_dir: Path) -> bool:
    """Whether `package_dir` holds a _C built for this interpreter."""
    return any(
        (package_dir / f"_C{suffix}").is_file() for suffix in importlib.machinery.EXTENSION_SUFFIXES
    )


def foreign_extensions(package_dir: Path) -> list[str]:
    """The _C files in `package_dir` that this interpreter cannot load: built for another
    Python version or platform (``_C.cpython-310-x86_64-linux-gnu.so`` seen from 3.11)."""
    ours = {f"_C{suffix}" for suffix in importlib.machinery.EXTENSION_SUFFIXES}
    return sorted(
        p.name
        for p in package_dir.glob("_C.*")
        if p.suffix in (".so", ".pyd", ".dylib") and p.name not in ours
    )


def is_source_tree(package_dir: Path) -> bool:
    """Whether `package_dir` is the galfast folder of a source checkout (not an install)."""
    root = package_dir.parent
    return (root / "setup.py").is_file() and (root / "CMakeLists.txt").is_file()


def installed_elsewhere(package_dir: Path, search_path: Sequence[str]) -> Optional[Path]:
    """Another galfast package on `search_path` that has its extension: the one the user
    installed, hidden behind `package_dir` because that comes first on the path."""
    for entry in search_path:
        candidate = (Path(entry or ".") / "galfast").resolve()
        if candidate != package_dir and has_extension(candidate):
            return candidate
    return None


def missing_extension_message(
    package_dir: Path, error: ImportError, search_path: Sequence[str]
) -> str:
    if not has_extension(package_dir) and is_source_tree(package_dir):
        build_here = (
            "or build the extension into this checkout with `pip install -e .` (or "
            "`python setup.py build_ext --inplace`)."
        )
        installed = installed_elsewhere(package_dir, search_path)
        if installed is not None:
            return (
                f"galfast was imported from the source checkout {package_dir}, which has no "
                "compiled extension (galfast._C), because that folder comes first on sys.path "
                "(it is the current directory or on PYTHONPATH); it hides the installed galfast "
                f"at {installed}. Run Python from another directory to use the installed one, "
                + build_here
            )
        return (
            f"galfast was imported from the source checkout {package_dir}, which has no "
            "compiled extension (galfast._C). Install it with `pip install .` and run Python "
            "from another directory, " + build_here
        )
    reinstall = (
        "reinstall galfast with this Python's pip (`python -m pip install --force-reinstall "
        "--no-deps .` in the source checkout or unpacked sdist)."
    )
    if not has_extension(package_dir):
        # The ImportError itself ("cannot import name '_C' from partially initialized module
        # 'galfast' (most likely due to a circular import)") would send the user astray.
        foreign = foreign_extensions(package_dir)
        found = (
            f"; it holds {', '.join(foreign)}, built for another Python or platform"
            if foreign
            else ""
        )
        expected = f"_C{importlib.machinery.EXTENSION_SUFFIXES[0]}"
        return (
            f"galfast in {package_dir} has no compiled extension for this Python "
            f"({sys.implementation.cache_tag}: {expected}){found}: {reinstall}"
        )
    return (
        f"galfast's native extension (galfast._C) in {package_dir} failed to load: {error}. "
        f"It was built for another system or its build is damaged: {reinstall}"
    )


def extension_file(package_dir: Path) -> Optional[Path]:
    """The _C file the import system loads from `package_dir` (the first suffix it tries)."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if (package_dir / f"_C{suffix}").is_file():
            return package_dir / f"_C{suffix}"
    return None


def truncated_extension_message(package_dir: Path) -> Optional[str]:
    """Why the _C in `package_dir` cannot be loaded, where it is shorter than its own headers
    say (loading it would end the interpreter with SIGBUS); None where it is whole."""
    path = extension_file(package_dir)
    if path is None:
        return None
    try:
        extent, size = elf_extent(path), path.stat().st_size
    except OSError:  # unreadable: the loader's own error says so
        return None
    if extent is None or extent <= size:
        return None
    return (
        f"galfast's native extension {path} is damaged: the file holds {size} bytes of the "
        f"{extent} its headers describe (an install or copy that was cut short, a full disk?). "
        "Reinstall galfast with this Python's pip (`python -m pip install --force-reinstall "
        "--no-deps .` in the source checkout or unpacked sdist)."
    )


def _refuse_to_load(message: str, cause: Optional[BaseException]) -> NoReturn:
    if is_the_command_line():
        print(f"galfast: error: {message}", file=sys.stderr)
        raise SystemExit(1)
    raise ImportError(message) from cause


_damage = truncated_extension_message(PACKAGE_DIR)
if _damage is not None:
    _refuse_to_load(_damage, None)
try:
    from galfast import _C
except ImportError as err:
    # A missing file: the import's own error and traceback say nothing more.
    _refuse_to_load(
        missing_extension_message(PACKAGE_DIR, err, sys.path),
        err if has_extension(PACKAGE_DIR) else None,
    )

__all__ = ["_C"]
