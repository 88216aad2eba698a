"""Build driver: every native build decision lives in CMakeLists.txt; this file only runs CMake."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def cmake_cache_entries(cache: Path) -> dict[str, str]:
    """NAME -> value of a CMakeCache.txt (`NAME:TYPE=value` lines)."""
    entries = {}
    for line in cache.read_text(errors="replace").splitlines():
        if line.startswith(("#", "//")) or "=" not in line:
            continue
        name_and_type, value = line.split("=", 1)
        entries[name_and_type.split(":", 1)[0]] = value
    return entries


def stale_cmake_cache_reason(cache: Path, paths: dict[str, str]) -> Optional[str]:
    """Why `cache` must not be reused with `paths` (cache entry -> the path it must name now:
    the cmake and ninja about to run, the source and build folders), or None when it can be (or
    there is none).

    pip builds in a throw-away environment whose cmake and ninja a cache keeps pointing at after
    that environment is deleted, so a second `pip install .` would fail in CMake; a copied or
    moved checkout keeps a cache that CMake refuses for naming the old folders."""
    if not cache.is_file():
        return None
    entries = cmake_cache_entries(cache)
    if entries.get("CMAKE_GENERATOR", "Ninja") != "Ninja":
        return f"it was made for the {entries['CMAKE_GENERATOR']} generator"
    for name, now in paths.items():
        recorded = entries.get(name)
        if recorded is None:
            continue
        if not os.path.exists(recorded):
            return f"its {name} {recorded} no longer exists"
        if os.path.realpath(recorded) != os.path.realpath(now):
            return f"its {name} {recorded} is not the one in use now ({now})"
    return None


def reset_stale_cmake_cache(build_temp: Path, paths: dict[str, str]) -> Optional[str]:
    """Deletes a stale CMakeCache.txt and returns why. Only the cache goes: the object files and
    ninja's log stay, so ninja still skips every object whose compile command is unchanged."""
    cache = build_temp / "CMakeCache.txt"
    reason = stale_cmake_cache_reason(cache, paths)
    if reason is not None:
        cache.unlink()
    return reason


def running_cmake() -> str:
    """The cmake binary that `cmake` runs: pip's cmake package puts a wrapper script on PATH
    whose target is what a CMake cache records as CMAKE_COMMAND."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "where.cmake"
        script.write_text('message("${CMAKE_COMMAND}")\n')
        where = subprocess.run(
            ["cmake", "-P", str(script)], capture_output=True, text=True, check=True
        )
    return where.stderr.strip()


def stable_pybind11_cmake_dir(folder: Path) -> str:
    """pybind11's CMake directory, from a copy of the pybind11 package in `folder` named by its
    version. pip builds in a fresh environment each time: headers at a new path change every
    compile command, and ninja would then recompile every object after any edit."""
    import pybind11

    package = Path(pybind11.__file__).resolve().parent
    cmake_dir = Path(pybind11.get_cmake_dir()).resolve()
    if package not in cmake_dir.parents:  # a system pybind11: its path is stable already
        return str(cmake_dir)
    copy = folder / f"pybind11-{pybind11.__version__}"
    if not copy.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        partial = folder / f"{copy.name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(package, partial, ignore=shutil.ignore_patterns("__pycache__"))
        partial.rename(copy)
    return str(copy / cmake_dir.relative_to(package))


def ninja_program() -> str:
    ninja = shutil.which("ninja")
    if ninja is None:
        import ninja as ninja_package  # the build requirement, when no ninja is on PATH

        ninja = str(Path(ninja_package.BIN_DIR) / "ninja")
    return ninja


def cmake_build_folder(build_temp: str, editable: bool, plat_name: str) -> Path:
    """Where CMake builds: setuptools' `build_temp`, except for an editable install, whose
    `build_temp` setuptools makes a temporary folder, deleted afterwards, so every
    `pip install -e .` compiled everything again (minutes; ten with CUDA). An editable build
    takes the folder `pip install .` builds in, and each reuses the other's objects."""
    if editable:
        return ROOT / "build" / f"temp.{plat_name}-{sys.implementation.cache_tag}"
    return Path(build_temp)


class CMakeExtension(Extension):
    def __init__(self, name: str) -> None:
        super().__init__(name, sources=[])  # CMake knows the sources


class CMakeBuild(build_ext):
    def build_extension(self, ext: CMakeExtension) -> None:
        out_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        cuda = {"0": "OFF", "1": "ON"}.get(os.environ.get("GALFAST_CUDA", ""), "AUTO")
        ninja = ninja_program()
        editable = getattr(self, "editable_mode", False)
        folder = cmake_build_folder(self.build_temp, editable, self.plat_name)
        args = [
            f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={out_dir}",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-Dpybind11_DIR={stable_pybind11_cmake_dir(folder)}",
            f"-DCMAKE_BUILD_TYPE={os.environ.get('GALFAST_BUILD_TYPE', 'Release')}",
            f"-DGALFAST_VERSION={self.distribution.get_version()}",
            f"-DGALFAST_CUDA={cuda}",
            f"-DGALFAST_SANITIZE={os.environ.get('GALFAST_SANITIZE', '')}",
            "-GNinja",
            f"-DCMAKE_MAKE_PROGRAM={ninja}",
        ]
        if os.environ.get("CMAKE_CUDA_ARCHITECTURES"):
            args.append(f"-DCMAKE_CUDA_ARCHITECTURES={os.environ['CMAKE_CUDA_ARCHITECTURES']}")
        build_temp = folder / ext.name
        build_temp.mkdir(parents=True, exist_ok=True)
        paths = {
            "CMAKE_COMMAND": running_cmake(),
            "CMAKE_MAKE_PROGRAM": ninja,
            "CMAKE_HOME_DIRECTORY": str(ROOT),
            "CMAKE_CACHEFILE_DIR": str(build_temp.resolve()),
        }
        reason = reset_stale_cmake_cache(build_temp, paths)
        if reason is not None:
            print(f"galfast: configuring {build_temp} afresh: {reason}", file=sys.stderr)
        subprocess.run(["cmake", str(ROOT), *args], cwd=build_temp, check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", ".", "-j", jobs], cwd=build_temp, check=True)


if __name__ == "__main__":  # setuptools runs this file as __main__; tests import its helpers
    setup(ext_modules=[CMakeExtension("galfast._C")], cmdclass={"build_ext": CMakeBuild})
