"""What `import galfast` says when an installed galfast (not a source checkout) has no
extension this Python can load: the folder, the file it looked for, any extension built for
another Python, and the reinstall command; never the import system's misleading "circular
import" text."""

from __future__ import annotations

import importlib.machinery
import os
import shutil
import subprocess
import sys
from pathlib import Path

from galfast import _native

ERROR = ImportError(
    "cannot import name '_C' from partially initialized module 'galfast' "
    "(most likely due to a circular import)"
)
OURS = f"_C{importlib.machinery.EXTENSION_SUFFIXES[0]}"


def _install(site: Path, extension: str = "") -> Path:
    package = site / "galfast"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    if extension:
        (package / extension).write_bytes(b"")
    return package


def test_an_install_without_the_extension_names_the_file_and_the_fix(tmp_path):
    installed = _install(tmp_path / "site-packages")
    message = _native.missing_extension_message(installed, ERROR, [str(tmp_path)])
    assert f"galfast in {installed} has no compiled extension for this Python" in message
    assert OURS in message and "pip install --force-reinstall" in message
    assert "circular" not in message


def test_an_extension_for_another_python_is_named(tmp_path):
    other = "_C.cpython-38-x86_64-linux-gnu.so"  # Python 3.8: never the running one
    installed = _install(tmp_path / "site-packages", other)
    message = _native.missing_extension_message(installed, ERROR, [str(tmp_path)])
    assert f"it holds {other}, built for another Python" in message


def test_importing_an_install_without_its_extension_gives_one_error(tmp_path):
    built = Path(_native.__file__).resolve().parent
    shutil.copytree(
        built,
        tmp_path / "site" / "galfast",
        ignore=shutil.ignore_patterns("_C*", "__pycache__"),
    )
    result = subprocess.run(
        [sys.executable, "-c", "import galfast"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "has no compiled extension for this Python" in result.stderr
    # One traceback: the import system's own error is not chained in.
    assert "circular import" not in result.stderr
    assert "During handling" not in result.stderr
