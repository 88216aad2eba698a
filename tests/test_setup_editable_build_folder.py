"""setup.py builds an editable install in the folder `pip install .` uses: setuptools hands an
editable build a temporary build folder, deleted afterwards, so every `pip install -e .`
(after each C++ edit) compiled every kernel again."""

from __future__ import annotations

import importlib.util
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def setup_module():
    spec = importlib.util.spec_from_file_location("galfast_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not __main__: defines the helpers, builds nothing
    return module


def test_an_editable_build_uses_the_checkouts_build_folder(setup_module, tmp_path):
    platform = sysconfig.get_platform()
    temporary = str(tmp_path / "tmpabc.build-temp")
    folder = setup_module.cmake_build_folder(temporary, editable=True, plat_name=platform)
    # setuptools' own build_temp for `pip install .` from the checkout.
    assert folder == ROOT / "build" / f"temp.{platform}-{sys.implementation.cache_tag}"


def test_a_plain_build_keeps_the_folder_setuptools_gives(setup_module, tmp_path):
    given = str(tmp_path / "build" / "temp")
    assert setup_module.cmake_build_folder(given, editable=False, plat_name="x") == Path(given)
