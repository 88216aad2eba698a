"""Output files: checked writable before any work, written atomically (a temporary file in
the same folder renamed over the target), so a failure or an interrupt never leaves a
half-written result and a full run never ends on an unwritable path. A symlink is written
through (its target is replaced, the link kept; a symlink to nothing only into a folder that
exists); a FIFO, device or socket is refused, since
the rename would replace it with a regular file, and so is a symlink to nothing among the
folders of a path, which would have its missing target created."""

from __future__ import annotations

import csv
import json
import math
import os
import secrets
import stat
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Callable, Optional

from galfast.cli.errors import UsageError

__all__ = [
    "atomic_write",
    "check_file_name",
    "check_folder_writable",
    "check_not_an_input",
    "check_writable",
    "folders_removed_on_failure",
    "save_figure",
    "write_csv",
    "write_json",
]


# The folders this process's checks created, parents first (folders_removed_on_failure).
_created_folders: list[Path] = []


def _make_folder(folder: Path, option: str) -> None:
    missing = [p for p in (folder, *folder.parents) if not os.path.lexists(p)]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"{option}: cannot create the folder {folder}: {error}") from None
    _created_folders.extend(reversed(missing))


@contextmanager
def folders_removed_on_failure() -> Iterator[None]:
    """Removes, when the block raises, the folders that the output checks inside it created
    and that are still empty: a command refused after its outputs were checked (a dataset
    file among them, found once the dataset has loaded) leaves no empty folders behind."""
    start = len(_created_folders)
    try:
        yield
    except BaseException:
        for folder in reversed(_created_folders[start:]):
            try:
                folder.rmdir()
            except OSError:  # no longer empty (another process's output), or gone
                pass
        raise
    finally:
        del _created_folders[start:]


def _check_folder_path(folder: Path, option: str) -> None:
    """Refuses a ``folder`` whose first existing part (itself or a parent) is not a folder: a
    file there (--out results.json for a folder) would fail the mkdir with "Not a directory"
    about a path never typed, and a symlink to nothing would have its target created."""
    existing = next((p for p in (folder, *folder.parents) if os.path.lexists(p)), None)
    if existing is not None and not existing.is_dir():
        what = "a symlink to nothing" if not existing.exists() else "a file"
        raise UsageError(f"{option}: {existing} is {what}, expected a folder")


def check_folder_writable(folder: os.PathLike, option: str) -> None:
    """Creates ``folder`` if needed and checks a file can be created in it; else UsageError
    naming ``option``."""
    folder = Path(folder)
    _check_folder_path(folder, option)
    _make_folder(folder, option)
    probe = folder / f".galfast-write-check.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        probe.open("x").close()
        probe.unlink()
    except OSError as error:
        raise UsageError(f"{option}: cannot write in {folder}: {error}") from None


def _target(path: os.PathLike) -> Path:
    """The file a write to ``path`` replaces: a symlink's target, else ``path``."""
    return Path(os.path.realpath(path))


def check_writable(path: os.PathLike, option: str) -> None:
    """Checks that ``atomic_write(path, ...)`` can succeed (the folder is creatable and
    writable, ``path`` is absent or a regular file, through symlinks); else UsageError naming
    ``option``."""
    check_file_name(path, option)
    # The folders as typed: the target's path below resolves a symlink to nothing away.
    _check_folder_path(Path(path).parent, option)
    target = _target(path)
    if os.path.islink(path) and not target.parent.is_dir():
        # As the shell's `>` does: a symlink to nothing is written through into a folder that
        # exists, never by creating folders at a place the user did not type.
        raise UsageError(
            f"{option}: {path} is a symlink to {os.readlink(path)}, whose folder does not "
            "exist; create it or name another file"
        )
    check_folder_writable(target.parent, option)


def check_file_name(path: os.PathLike, option: str) -> None:
    """Refuses (UsageError naming ``option``) a ``path`` that names something other than a
    file to write: a folder, a FIFO, a device or a socket, or that the system cannot look up
    (a name too long for it). Creates nothing."""
    try:
        mode = os.stat(path).st_mode  # through a symlink, as the write goes
    except (FileNotFoundError, NotADirectoryError):
        return  # a new file (a file used as a folder on its way is refused with the folders)
    except OSError as error:  # a name too long, a loop of symlinks
        raise UsageError(f"{option}: {path}: {error.strerror}") from None
    if stat.S_ISDIR(mode):
        raise UsageError(f"{option}: {path} is a folder, expected a file name")
    if not stat.S_ISREG(mode):
        raise UsageError(
            f"{option}: {path} is not a regular file (a FIFO, a device or a socket); "
            "name a file to write"
        )


def check_not_an_input(
    path: os.PathLike, option: str, inputs: Mapping[str, Optional[os.PathLike]]
) -> None:
    """Refuses (UsageError naming ``option``) an output ``path`` that is the same file as one of
    the command's ``inputs`` (what names it -> its path, None where not given): through a
    symlink, a hard link or another spelling of the path, writing it would replace the input
    the command has just read."""
    for what, source in inputs.items():
        if source is not None and _same_file(path, source):
            raise UsageError(
                f"{option} {path} is the same file as {what} {source}: writing it would "
                "overwrite that input; name another file"
            )


def _same_file(first: os.PathLike, second: os.PathLike) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:  # one is absent (or unreadable): the same file only by its resolved path
        return os.path.realpath(first) == os.path.realpath(second)


def atomic_write(path: os.PathLike, write: Callable[[IO], None], *, binary: bool = False) -> None:
    """Calls ``write(handle)`` on a new temporary file next to ``path`` (next to its target
    for a symlink) and renames it over that once complete; on any failure the temporary file
    is removed."""
    path = _target(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "xb" if binary else "x", **({} if binary else {"newline": ""})) as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json(path: os.PathLike, data: Any) -> None:
    """Writes ``data`` as indented JSON, atomically. JSON has no NaN or infinity: such a float
    is written as null (a metric with no value, which a reader never takes for a score)."""
    text = json.dumps(_null_for_non_finite(data), indent=2, allow_nan=False) + "\n"
    atomic_write(path, lambda f: f.write(text))


def _null_for_non_finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _null_for_non_finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_null_for_non_finite(item) for item in value]
    return value


def write_csv(path: os.PathLike, rows: Sequence[dict[str, Any]]) -> None:
    """Writes dict rows as CSV (columns in first-seen order), atomically."""
    fields = list(dict.fromkeys(k for row in rows for k in row))

    def write(handle: IO) -> None:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)

    atomic_write(path, write)


def save_figure(fig, path: os.PathLike, dpi: int = 120) -> None:
    """Saves a matplotlib figure atomically, in the format its suffix names."""
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower() or "png"
    atomic_write(path, lambda f: fig.savefig(f, format=fmt, dpi=dpi), binary=True)
