"""The wheel of the real CUDA build of the pin (sm_90), installed offline into a fresh virtual
environment with NVIDIA's real wheels as its dependencies (``nvidia-cuda-runtime`` from
``<cache>/cuda-toolkit-wheels/``, ``nvidia-cublas`` from ``<cache>/cuda-pypi/wheels/``).

There is no NVIDIA driver here: llama-bindgen's link-time ``libcuda`` stub stands in for it on
the loader's path, and nothing else of NVIDIA's is put there, so the CUDA runtime and cuBLAS the
process maps can only have come through the wheel's RPATH from NVIDIA's installed wheels. Then:
``import llama_bindings`` and ``load()`` (the ABI guard against the wheel's build record), ggml
listing no CUDA device (the stub's calls all fail) without crashing, and the smoke refusing with
its "no NVIDIA driver" reason.

Deselected from the default run (``-m "not cuda_build"`` in pyproject.toml): it needs the CUDA
build, 34 minutes and more cold on 2 cores, which ``.ci/run`` cannot afford. ``nox -s cuda_wheel``
runs it (building, or reusing, the CUDA build first); docs/reference/support-matrix.md records
where and when it last ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from generator.errors import BindgenError
from generator.native.build import build_native, cuda_compiler, cuda_resolution
from generator.native.cuda_pypi import CUDA_PYPI_DIR, STUB_LOAD_DIR, link_library_dirs
from generator.paths import default_cache_dir
from generator.release.wheels import NOT_GATED
from generator.smoke import NOT_RUN, run_smoke
from tests.release.venvs import pip_install, venv
from tests.repo import REPO_ROOT
from tests.trees import PIN

CUDA_ARCH = "90"
TOOLKIT_STORE = "cuda-toolkit-wheels"  # filled by nox (noxfile.py)
pytestmark = [pytest.mark.cuda_build, pytest.mark.slow, pytest.mark.needs_tree]

PROBE = """
import json, llama_bindings
libs = llama_bindings.load()
ggml, ffi = libs.ggml, libs.ffi
names = [ffi.string(ggml.ggml_backend_dev_name(ggml.ggml_backend_dev_get(i))).decode()
         for i in range(int(ggml.ggml_backend_dev_count()))]
maps = open('/proc/self/maps').read().split()
mapped = sorted({p for p in maps if '/lib' in p and ('libcu' in p or 'libggml-cuda' in p)})
print(json.dumps({'lib_dir': str(libs.lib_dir), 'devices': names, 'mapped': mapped}))
"""


@pytest.fixture(scope="module")
def cuda_wheel(tree_pin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`llama-bindgen wheel <the pin> --backend cuda` of the sm_90 build (built or reused)."""
    try:
        build = build_native(tree_pin, "linux-x86_64", backend="cuda", cuda_arch=CUDA_ARCH)
    except BindgenError as exc:
        pytest.fail(f"the CUDA build failed: {exc}")
    out = tmp_path_factory.mktemp("cuda-wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "generator", "wheel", PIN, "--platform", "linux-x86_64",
         "--backend", "cuda", "--native", str(build.platform_dir.parent), "--out", str(out)],
        cwd=REPO_ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip().splitlines()[-1])


@dataclass(frozen=True)
class Installed:
    """The CUDA wheel installed offline into a fresh virtual environment (once per module)."""

    folder: Path  # the virtual environment
    python: Path
    said: str  # what pip printed


@pytest.fixture(scope="module")
def installed(cuda_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    folder = tmp_path_factory.mktemp("cuda-venv") / "venv"
    python = venv(folder)
    stores = [default_cache_dir() / TOOLKIT_STORE, default_cache_dir() / CUDA_PYPI_DIR / "wheels"]
    said = pip_install(python, cuda_wheel.parent, "llama-bindings-cu13", *stores)
    return Installed(folder, python, said)


def _stub_folder() -> Path:
    compiler = cuda_compiler()
    assert compiler is not None, "the CUDA build found nvcc; it must still be there"
    (stub,) = [d for d in link_library_dirs(cuda_resolution(compiler)) if d.name == STUB_LOAD_DIR]
    return stub


def test_the_cuda_wheel_installs_with_nvidia_s_wheels_and_loads_them(
    cuda_wheel: Path, installed: Installed, tmp_path: Path
) -> None:
    assert cuda_wheel.name.startswith(f"llama_bindings_cu13-{PIN[1:]}."), cuda_wheel.name
    with zipfile.ZipFile(cuda_wheel) as archive:
        shipped = {Path(n).name for n in archive.namelist() if "/lib/" in n}
        info = json.loads(archive.read("llama_bindings/build-info.json"))
    assert info["wheel"]["gates"] == NOT_GATED, info["wheel"]  # its smoke never ran
    assert any(n.startswith("libggml-cuda.so") for n in shipped), shipped
    assert not any(n.startswith(("libcudart", "libcublas", "libcuda.")) for n in shipped)
    said = installed.said
    assert "nvidia-cublas" in said and "nvidia-cuda-runtime" in said, said
    env = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": str(_stub_folder())}
    proc = subprocess.run(
        [str(installed.python), "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    site = Path(found["lib_dir"]).parent.parent
    assert site.is_relative_to(installed.folder), found
    nvidia = site / "nvidia" / "cu13" / "lib"
    for name in ("libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13"):
        assert str(nvidia / name) in found["mapped"], found["mapped"]
    assert not any(d.startswith("CUDA") for d in found["devices"]), found["devices"]


def test_the_installed_cuda_wheel_s_smoke_refuses_without_a_driver(
    installed: Installed, tmp_path: Path
) -> None:
    assert "cuda" not in os.environ.get("LD_LIBRARY_PATH", "")
    empty = tmp_path / "empty"
    empty.mkdir()
    python = [str(installed.python)]
    report = run_smoke(
        "linux-x86_64", None, empty, tmp_path / "smoke", backend="cuda", python=python
    )
    assert report.status == NOT_RUN, report.table()
    assert "no NVIDIA driver (libcuda) on this machine" in report.reason, report.reason
