"""The source distribution holds what `pip install galfast-*.tar.gz` needs to build (CMake's
description and every kernel source), the bundled Cora, and the test suite with its helpers.
Read from setuptools' file list (`setup.py egg_info`, well under a second): nothing is built."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def sdist_files(tmp_path_factory) -> set[str]:
    egg_base = tmp_path_factory.mktemp("egg-info")
    subprocess.run(
        [sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(egg_base)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return set((egg_base / "galfast.egg-info" / "SOURCES.txt").read_text().splitlines())


def test_the_build_inputs_are_in_the_sdist(sdist_files):
    sources = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "csrc").rglob("*")
        if p.suffix in (".h", ".cpp", ".cu", ".cuh")
    }
    assert sources, "no kernel sources found beside this test"
    assert {"CMakeLists.txt", "setup.py", "pyproject.toml", "LICENSE"} <= sdist_files
    assert sources - sdist_files == set()


def test_the_bundled_data_and_the_tests_are_in_the_sdist(sdist_files):
    assert "galfast/datasets/data/cora.npz" in sdist_files
    assert "galfast/datasets/data/LICENSE-planetoid.txt" in sdist_files
    assert {"tests/conftest.py", "tests/same_galfast.py"} <= sdist_files


def test_no_compiled_file_is_in_the_sdist(sdist_files):
    assert [f for f in sdist_files if f.endswith((".so", ".pyd", ".o", ".pyc"))] == []
