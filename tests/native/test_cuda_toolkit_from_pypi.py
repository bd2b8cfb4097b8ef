"""The release workflow's CUDA toolkit: ``tools/cuda-toolkit-from-pypi`` installs NVIDIA's CUDA
13.0 wheels (pinned in ``tools/cuda-toolkit-13.0.txt``) offline from the wheels ``nox -s tests``
downloaded into ``<cache>/cuda-toolkit-wheels/``, and CMake's CUDA language and FindCUDAToolkit
take the result: a kernel for sm_90 compiles and links the runtime. Without the links the script
adds (``lib64``, ``targets/x86_64-linux``), CMake's CUDA compiler check fails on the bare wheels
(seen here on 2026-12-06), which is why the script makes them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from generator.native import cuda_pypi
from generator.paths import default_cache_dir
from generator.release.cuda_wheels import needed
from tests.repo import REPO_ROOT

TOOL = REPO_ROOT / "tools" / "cuda-toolkit-from-pypi"
STORE = "cuda-toolkit-wheels"  # filled by `nox -s tests` (noxfile.py) before pytest
PROJECT = """cmake_minimum_required(VERSION 3.18)
project(probe LANGUAGES C CXX CUDA)
find_package(CUDAToolkit REQUIRED)
add_library(probe SHARED probe.cu)
target_link_libraries(probe PRIVATE CUDA::cudart)
"""
KERNEL = """__global__ void twice(float *x) { x[threadIdx.x] *= 2.0f; }
extern "C" int probe_launch(float *x) { twice<<<1, 32>>>(x); return (int)cudaGetLastError(); }
"""


def _install(dest: Path) -> subprocess.CompletedProcess[str]:
    store = default_cache_dir() / STORE
    if not any(store.glob("nvidia_cuda_nvcc-*.whl")):
        pytest.fail(f"no CUDA toolkit wheels in {store}: `nox -s tests` downloads them first")
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(store),
           "PYTHON": sys.executable}  # fmt: skip
    return subprocess.run(
        [str(TOOL), str(dest)], env=env, capture_output=True, text=True, check=False
    )


@pytest.mark.slow
def test_the_workflow_s_cuda_toolkit_installs_offline_and_compiles_a_kernel(
    tmp_path: Path,
) -> None:
    proc = _install(tmp_path / "toolkit")
    assert proc.returncode == 0, proc.stderr
    bin_dir = Path(proc.stdout.strip().splitlines()[-1])
    assert bin_dir == tmp_path / "toolkit" / "nvidia" / "cu13" / "bin"
    assert "release 13.0" in proc.stderr
    resolution = cuda_pypi.resolve(bin_dir / "nvcc", [], ())
    assert resolution.version == (13, 0) and not resolution.why_not
    assert [w.package for w in resolution.wheels] == ["nvidia-cublas"]  # cuBLAS comes from PyPI
    (tmp_path / "CMakeLists.txt").write_text(PROJECT)
    (tmp_path / "probe.cu").write_text(KERNEL)
    build = tmp_path / "build"
    configure = subprocess.run(
        ["cmake", "-S", str(tmp_path), "-B", str(build), "-G", "Ninja",
         f"-DCMAKE_CUDA_COMPILER={bin_dir / 'nvcc'}", "-DCMAKE_CUDA_ARCHITECTURES=90"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert configure.returncode == 0, configure.stdout[-3000:] + configure.stderr[-3000:]
    assert f"Found CUDAToolkit: {bin_dir.parent / 'include'}" in configure.stdout
    made = subprocess.run(
        ["cmake", "--build", str(build)], capture_output=True, text=True, check=False
    )
    assert made.returncode == 0, made.stdout[-3000:]
    assert "libcudart.so.13" in needed(build / "libprobe.so")


def test_the_toolkit_script_needs_its_destination() -> None:
    proc = subprocess.run([str(TOOL)], capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "usage: tools/cuda-toolkit-from-pypi DEST" in proc.stderr
