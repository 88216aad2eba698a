"""What `import galfast` says when the extension cannot be loaded: a source checkout without a
build that shadows an installed galfast is named as such, with the ways out."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from galfast import _native

ERROR = ImportError("cannot import name '_C'")


def _checkout(root: Path) -> Path:
    """A source checkout's layout: setup.py and CMakeLists.txt beside an unbuilt galfast/."""
    (root / "galfast").mkdir(parents=True)
    (root / "galfast" / "__init__.py").write_text("")
    (root / "setup.py").write_text("")
    (root / "CMakeLists.txt").write_text("")
    return root / "galfast"


def _install(site: Path) -> Path:
    package = site / "galfast"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / f"_C{_native.importlib.machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    return package


def test_a_checkout_that_hides_an_installed_galfast_says_so(tmp_path):
    checkout = _checkout(tmp_path / "src")
    installed = _install(tmp_path / "site-packages")
    search_path = [str(tmp_path / "src"), str(tmp_path / "site-packages")]
    message = _native.missing_extension_message(checkout, ERROR, search_path)
    assert f"source checkout {checkout}" in message
    assert f"hides the installed galfast at {installed}" in message
    assert "another directory" in message and "pip install -e ." in message


def test_a_checkout_with_nothing_installed_says_how_to_build(tmp_path):
    checkout = _checkout(tmp_path / "src")
    message = _native.missing_extension_message(checkout, ERROR, [str(tmp_path / "src")])
    assert "hides" not in message
    assert "pip install -e ." in message and "build_ext --inplace" in message


def test_a_broken_install_keeps_the_original_error(tmp_path):
    installed = _install(tmp_path / "site-packages")
    message = _native.missing_extension_message(installed, ERROR, [str(tmp_path)])
    assert "failed to load" in message and str(ERROR) in message
    assert "imported from the source checkout" not in message


def test_importing_from_an_unbuilt_checkout_names_the_shadowed_install(tmp_path):
    # The situation after `pip install .`: Python started inside the checkout imports its
    # unbuilt galfast/ rather than the installed one (here: this test run's built package).
    built = Path(_native.__file__).resolve().parent
    shutil.copytree(
        built, tmp_path / "galfast", ignore=shutil.ignore_patterns("_C*", "__pycache__")
    )
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "CMakeLists.txt").write_text("")
    result = subprocess.run(
        [sys.executable, "-c", "import galfast"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(built.parent)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert f"hides the installed galfast at {built}" in result.stderr
