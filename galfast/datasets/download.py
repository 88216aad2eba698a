"""Fetching raw dataset files: cache folder, verified atomic downloads, safe zip extraction.

Every real loader describes what it needs as :class:`Resource` objects (canonical URL, file
name, SHA-256). :func:`fetch` downloads one into the cache with a progress bar, hashing while
it streams, and moves it into place only once the hash matches, so the cache never holds a
partial or unverified file. A resource whose SHA-256 is not known in advance is hashed on its
first download, the hash is written next to it (``<file>.sha256``) and reported with an
:class:`UnpinnedChecksumWarning`; later downloads must match that pinned hash.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import tempfile
import urllib.request
import warnings
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from tqdm.auto import tqdm

__all__ = [
    "ChecksumError",
    "DatasetNotFoundError",
    "Resource",
    "UnpinnedChecksumWarning",
    "check_opener",
    "check_root",
    "data_dir",
    "extract_zip",
    "fetch",
    "new_partial",
    "pin_path",
    "verify_file",
]

_CHUNK = 1 << 20
_TIMEOUT_S = 30


class DatasetNotFoundError(FileNotFoundError):
    """The dataset is neither on disk nor downloadable; the message says what to put where."""


class ChecksumError(ValueError):
    """A downloaded file's SHA-256 differs from the pinned one (corrupt or changed upstream)."""


class UnpinnedChecksumWarning(UserWarning):
    """A file was downloaded whose SHA-256 galfast did not know; it is now pinned locally."""


@dataclass(frozen=True)
class Resource:
    """One downloadable file.

    Attributes:
        url: canonical source.
        filename: name it gets in the cache folder.
        sha256: expected hex digest, or ``None`` when not published (pinned on first download).
    """

    url: str
    filename: str
    sha256: Optional[str] = None


def data_dir() -> Path:
    """The dataset cache: ``$GALFAST_DATA`` when set, else ``~/.cache/galfast``."""
    configured = os.environ.get("GALFAST_DATA")
    if not configured:
        return Path.home() / ".cache" / "galfast"
    return _folder("GALFAST_DATA", configured)


def check_root(root: Any) -> Optional[Path]:
    """A loader's ``root`` as a Path (``~`` expanded), or None for the cache. A str or an
    os.PathLike; bytes too, decoded as ``os`` decodes file names (pathlib alone refuses
    them). An int failed inside pathlib, an empty path read as the working folder."""
    if root is None:
        return None
    if not isinstance(root, (str, bytes, os.PathLike)):
        raise ValueError(f"root must be a path (str or os.PathLike), got {type(root).__name__}")
    try:
        text = os.fsdecode(root)
    except TypeError as error:  # an __fspath__ returning neither str nor bytes
        raise ValueError(f"root must be a path: {error}") from None
    if not text:
        raise ValueError("root must be a non-empty path (None: the cache folder)")
    return _folder("root", text)


def _folder(name: str, text: str) -> Path:
    """`text` as a folder path: ``~`` expanded, refused when it holds a NUL or names a file
    (the loaders looked for data under a file, qm9 failed on writing its cache there)."""
    if "\0" in text:
        raise ValueError(f"{name} must not contain a NUL character, got {text!r}")
    try:
        path = Path(text).expanduser()
    except RuntimeError as error:  # ~name of no user
        raise ValueError(f"{name}={text}: {error}") from None
    if path.exists() and not path.is_dir():
        raise ValueError(f"{name} must be a folder, {path} is a file")
    return path


def check_opener(opener: Any) -> Callable[..., object]:
    """``opener`` when it is callable as ``urllib.request.urlopen`` is (checked even with
    ``download=False``: None failed only once a download was needed)."""
    if not callable(opener):
        raise ValueError(
            f"opener must be a callable like urllib.request.urlopen, got {type(opener).__name__}"
        )
    return opener


def new_partial(target: Path, suffix: str) -> Path:
    """A new empty file next to `target`, to be renamed onto it once complete, with the mode
    open() gives (0666 less the umask): the 0600 of tempfile.mkstemp kept other users of a
    shared data folder from reading the files written through it."""
    partial = target.with_name(f".{target.name}.{secrets.token_hex(8)}{suffix}")
    os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    return partial


def pin_path(target: Path) -> Path:
    """Where the SHA-256 of a downloaded `target` without a published one is pinned."""
    return target.with_name(target.name + ".sha256")


def _expected_sha256(resource: Resource, target: Path) -> Optional[str]:
    if resource.sha256 is not None:
        return resource.sha256.lower()
    pin = pin_path(target)
    if not pin.is_file():
        return None
    # A pin cut short (a crash or a full disk while it was written) or edited by hand.
    words = pin.read_text(errors="replace").split()
    if not words or not re.fullmatch("[0-9a-f]{64}", words[0].lower()):
        raise ChecksumError(
            f"{pin} holds no SHA-256 (expected 64 hex digits and the file name). Delete it to "
            "pin the next download afresh, or write the hash of a trusted copy into it."
        )
    return words[0].lower()


def verify_file(path: Path, resource: Resource) -> None:
    """Raises :class:`ChecksumError` unless `path` has the resource's SHA-256 (pinned or
    published); a file with no known hash passes."""
    expected = _expected_sha256(resource, Path(path))
    if expected is None:
        return
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    if digest.hexdigest() != expected:
        raise ChecksumError(
            f"SHA-256 mismatch for {path}: expected {expected} (the file from {resource.url}), "
            f"got {digest.hexdigest()}. Replace it with an intact copy."
        )


def fetch(
    resource: Resource,
    directory: Path,
    *,
    opener: Callable[..., object] = urllib.request.urlopen,
    progress: bool = True,
) -> Path:
    """Returns ``directory / resource.filename``, downloading and verifying it if absent.

    The bytes go to a temporary file in `directory` and are renamed into place only after the
    SHA-256 check, so an interrupted or corrupt download leaves nothing behind.

    Raises:
        ChecksumError: the download does not match the pinned SHA-256.
        OSError: the download failed (``urllib.error.URLError`` is an ``OSError``).
    """
    directory = Path(directory)
    target = directory / resource.filename
    if target.is_file():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    expected = _expected_sha256(resource, target)
    partial = new_partial(target, ".part")
    try:
        digest = hashlib.sha256()
        with open(partial, "wb") as out, opener(resource.url, timeout=_TIMEOUT_S) as response:
            length = response.headers.get("Content-Length")
            with tqdm(
                total=int(length) if length else None,
                unit="B",
                unit_scale=True,
                desc=resource.filename,
                disable=not progress,
            ) as bar:
                while chunk := response.read(_CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
        actual = digest.hexdigest()
        if expected is not None and actual != expected:
            raise ChecksumError(
                f"SHA-256 mismatch for {resource.filename} downloaded from {resource.url}: "
                f"expected {expected}, got {actual}. The download is corrupt or the file changed "
                "upstream; nothing was saved. Retry, or place a verified copy in "
                f"{directory} yourself."
            )
        os.replace(partial, target)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    if expected is None:
        pin_path(target).write_text(f"{actual}  {resource.filename}\n")
        warnings.warn(
            f"{resource.filename} from {resource.url} has no published SHA-256; galfast pinned "
            f"the downloaded file's hash {actual} in {pin_path(target)} and will require it "
            "on later downloads. Compare it with a trusted copy if you can.",
            UnpinnedChecksumWarning,
            stacklevel=2,
        )
    return target


def extract_zip(archive: Path, directory: Path, member_root: str) -> Path:
    """Extracts the folder `member_root` of `archive` to ``directory / member_root`` atomically.

    Members are unpacked into a temporary folder next to the destination, checked not to escape
    it (no absolute paths or ``..``), and the folder is renamed into place in one step.
    """
    directory = Path(directory)
    destination = directory / member_root
    if destination.is_dir():
        return destination
    staging = Path(tempfile.mkdtemp(dir=directory, prefix=f".{member_root}."))
    try:
        try:
            _extract_all(archive, staging)
        # What zipfile raises for a damaged archive (a bad header, CRC or deflate stream).
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as err:
            raise ValueError(
                f"{archive} is damaged ({type(err).__name__}: {err}); delete it and download "
                "it again"
            ) from err
        unpacked = staging / member_root
        if not unpacked.is_dir():
            raise ValueError(f"{archive} has no top-level folder {member_root!r}")
        os.replace(unpacked, destination)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return destination


def _extract_all(archive: Path, staging: Path) -> None:
    """Extracts every member of `archive` into `staging`, refusing paths that leave it."""
    with zipfile.ZipFile(archive) as zipped:
        for member in zipped.namelist():
            resolved = (staging / member).resolve()
            if not resolved.is_relative_to(staging.resolve()):
                raise ValueError(f"{archive} holds an unsafe member path {member!r}")
        zipped.extractall(staging)
