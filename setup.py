"""Build driver: every native build decision lives in CMakeLists.txt; this file only runs CMake."""

import os
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self, name: str) -> None:
        super().__init__(name, sources=[])  # CMake knows the sources


class CMakeBuild(build_ext):
    def build_extension(self, ext: CMakeExtension) -> None:
        import pybind11

        out_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        cuda = {"0": "OFF", "1": "ON"}.get(os.environ.get("GALFAST_CUDA", ""), "AUTO")
        args = [
            f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={out_dir}",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
            f"-DCMAKE_BUILD_TYPE={os.environ.get('GALFAST_BUILD_TYPE', 'Release')}",
            f"-DGALFAST_VERSION={self.distribution.get_version()}",
            f"-DGALFAST_CUDA={cuda}",
            "-GNinja",
        ]
        if os.environ.get("CMAKE_CUDA_ARCHITECTURES"):
            args.append(f"-DCMAKE_CUDA_ARCHITECTURES={os.environ['CMAKE_CUDA_ARCHITECTURES']}")
        build_temp = Path(self.build_temp) / ext.name
        build_temp.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cmake", str(ROOT), *args], cwd=build_temp, check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", ".", "-j", jobs], cwd=build_temp, check=True)


setup(ext_modules=[CMakeExtension("galfast._C")], cmdclass={"build_ext": CMakeBuild})
