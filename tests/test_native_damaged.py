"""A damaged install: a `_C` cut short is refused with an ImportError naming the file and the
fix (loading it would end the interpreter with SIGBUS), and the ``galfast`` command says why
it cannot start in one line, without a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from galfast import _native
from galfast._elf_extent import elf_extent

BUILT = Path(_native.__file__).resolve().parent
EXTENSION = _native.extension_file(BUILT)


def _copy(site: Path, extension: bool = True) -> Path:
    """The galfast under test copied into ``site``, with or without its extension."""
    skipped = ["__pycache__"] if extension else ["__pycache__", "_C*"]
    package = site / "galfast"
    shutil.copytree(BUILT, package, ignore=shutil.ignore_patterns(*skipped))
    return package


def _python(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_whole_extension_spans_exactly_its_file():
    assert elf_extent(EXTENSION) == EXTENSION.stat().st_size


def test_a_file_that_is_not_elf_has_no_extent(tmp_path):
    (tmp_path / "_C.pyd").write_bytes(b"MZ" + bytes(200))
    assert elf_extent(tmp_path / "_C.pyd") is None


@pytest.mark.parametrize("kept", [16, 40, 4096, "half", "all but one"])
def test_a_cut_extension_spans_more_than_its_file(tmp_path, kept):
    size = EXTENSION.stat().st_size
    kept = {"half": size // 2, "all but one": size - 1}.get(kept, kept)
    cut = tmp_path / EXTENSION.name
    cut.write_bytes(EXTENSION.read_bytes()[:kept])
    assert elf_extent(cut) > kept


def test_importing_a_cut_extension_raises_naming_it(tmp_path):
    package = _copy(tmp_path / "site")
    damaged = package / EXTENSION.name
    size = damaged.stat().st_size
    os.truncate(damaged, size // 2)
    result = _python(tmp_path / "site", "-c", "import galfast", cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-2000:]  # an exception, not SIGBUS (-7)
    assert f"galfast's native extension {damaged} is damaged" in result.stderr
    assert f"holds {size // 2} bytes of the {size} its headers describe" in result.stderr
    assert "pip install --force-reinstall" in result.stderr


@pytest.mark.parametrize("how", ["console script", "python -m galfast"])
def test_the_command_without_its_extension_says_so_in_one_line(tmp_path, how):
    _copy(tmp_path / "site", extension=False)
    script = tmp_path / "bin" / "galfast"  # as pip's console script, named after the command
    script.parent.mkdir()
    script.write_text(
        "import sys\nfrom galfast.cli import run_and_exit\nsys.exit(run_and_exit())\n"
    )
    command = [str(script)] if how == "console script" else ["-m", "galfast"]
    result = _python(tmp_path / "site", *command, "demo", "--help", cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith("galfast: error: galfast in ")
    assert "has no compiled extension for this Python" in lines[0]


def test_a_library_import_without_the_extension_still_raises(tmp_path):
    _copy(tmp_path / "site", extension=False)
    result = _python(tmp_path / "site", "-c", "import galfast", cwd=tmp_path)
    assert "ImportError: galfast in " in result.stderr


def test_an_unreadable_extension_is_left_to_the_loader_to_name(tmp_path, monkeypatch):
    def unreadable(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(_native, "elf_extent", unreadable)
    assert _native.truncated_extension_message(BUILT) is None
