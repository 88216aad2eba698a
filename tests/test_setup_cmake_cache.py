"""setup.py's handling of a CMake cache left by an earlier build: a cache that names a cmake or
ninja other than the ones about to run (pip's deleted build environment) is dropped before
configuring, and only the cache: object files stay for ninja to reuse."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

SETUP_PY = Path(__file__).resolve().parent.parent / "setup.py"


@pytest.fixture(scope="module")
def setup_module():
    spec = importlib.util.spec_from_file_location("galfast_setup", SETUP_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not __main__: defines the helpers, builds nothing
    return module


def _tool(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    return str(path)


def _build_folder(tmp_path: Path, cmake: str, ninja: str, generator: str = "Ninja") -> Path:
    build = tmp_path / "build"
    (build / "CMakeFiles" / "_C.dir").mkdir(parents=True)
    (build / "CMakeFiles" / "_C.dir" / "graph.cpp.o").write_bytes(b"object")
    (build / "CMakeCache.txt").write_text(
        "# This is the CMakeCache file.\n"
        "//Program used to build from build.ninja files.\n"
        f"CMAKE_MAKE_PROGRAM:FILEPATH={ninja}\n"
        f"CMAKE_COMMAND:INTERNAL={cmake}\n"
        f"CMAKE_GENERATOR:INTERNAL={generator}\n"
    )
    return build


def test_a_cache_from_a_deleted_build_environment_is_dropped_and_objects_kept(
    setup_module, tmp_path
):
    gone = tmp_path / "pip-build-env-1234" / "overlay" / "bin"
    build = _build_folder(tmp_path, str(gone / "cmake"), str(gone / "ninja"))
    tools = {
        "CMAKE_COMMAND": _tool(tmp_path / "env" / "cmake"),
        "CMAKE_MAKE_PROGRAM": _tool(tmp_path / "env" / "ninja"),
    }
    reason = setup_module.reset_stale_cmake_cache(build, tools)
    assert reason is not None and "no longer exists" in reason
    assert not (build / "CMakeCache.txt").exists()
    assert (build / "CMakeFiles" / "_C.dir" / "graph.cpp.o").read_bytes() == b"object"


def test_a_cache_made_with_the_tools_in_use_is_kept(setup_module, tmp_path):
    cmake, ninja = _tool(tmp_path / "env" / "cmake"), _tool(tmp_path / "env" / "ninja")
    build = _build_folder(tmp_path, cmake, ninja)
    tools = {"CMAKE_COMMAND": cmake, "CMAKE_MAKE_PROGRAM": ninja}
    assert setup_module.reset_stale_cmake_cache(build, tools) is None
    assert (build / "CMakeCache.txt").exists()


def test_a_cache_made_with_other_existing_tools_is_dropped(setup_module, tmp_path):
    # `python setup.py build_ext` with the venv's cmake after a `pip install .` with pip's.
    cmake, ninja = _tool(tmp_path / "venv" / "cmake"), _tool(tmp_path / "venv" / "ninja")
    build = _build_folder(tmp_path, _tool(tmp_path / "other" / "cmake"), ninja)
    reason = setup_module.stale_cmake_cache_reason(
        build / "CMakeCache.txt", {"CMAKE_COMMAND": cmake, "CMAKE_MAKE_PROGRAM": ninja}
    )
    assert reason is not None and "CMAKE_COMMAND" in reason and "not the one in use" in reason


def test_a_cache_from_a_copied_checkout_is_dropped(setup_module, tmp_path):
    # CMake refuses a cache that names other source and build folders.
    old = _tool(tmp_path / "old-checkout" / "CMakeLists.txt")
    build = _build_folder(tmp_path, _tool(tmp_path / "cmake"), _tool(tmp_path / "ninja"))
    with open(build / "CMakeCache.txt", "a") as cache:
        cache.write(f"CMAKE_HOME_DIRECTORY:INTERNAL={Path(old).parent}\n")
    new = tmp_path / "new-checkout"
    new.mkdir()
    reason = setup_module.reset_stale_cmake_cache(build, {"CMAKE_HOME_DIRECTORY": str(new)})
    assert reason is not None and "CMAKE_HOME_DIRECTORY" in reason


def test_a_cache_for_another_generator_is_dropped(setup_module, tmp_path):
    cmake, ninja = _tool(tmp_path / "env" / "cmake"), _tool(tmp_path / "env" / "ninja")
    build = _build_folder(tmp_path, cmake, ninja, generator="Unix Makefiles")
    tools = {"CMAKE_COMMAND": cmake, "CMAKE_MAKE_PROGRAM": ninja}
    assert "Unix Makefiles" in setup_module.reset_stale_cmake_cache(build, tools)


def test_no_cache_nothing_to_drop(setup_module, tmp_path):
    assert setup_module.reset_stale_cmake_cache(tmp_path, {"CMAKE_COMMAND": "cmake"}) is None


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake on PATH")
def test_the_running_cmake_is_the_binary_a_cache_records(setup_module):
    assert Path(setup_module.running_cmake()).is_file()


def test_pybind11_is_found_at_the_same_path_from_any_build_environment(setup_module, tmp_path):
    # Its headers' path is part of every compile command: a path that changes with each pip
    # build environment would make ninja recompile everything.
    first = setup_module.stable_pybind11_cmake_dir(tmp_path)
    assert (Path(first) / "pybind11Config.cmake").is_file()
    assert setup_module.stable_pybind11_cmake_dir(tmp_path) == first
