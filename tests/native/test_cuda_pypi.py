"""CUDA builds on a toolkit without cuBLAS or libcuda: what comes from PyPI, what is compiled.

Pure Python on made-up toolkit folders (no nvcc, no network, no CUDA build): which wheels a
toolkit gets, the CMake options that point FindCUDAToolkit at them, the wheel's unpacking and
its sha256 pin, the libcuda link stub, and ``--cuda-arch``. The CUDA build itself is not part of
the test suite (docs/reference/support-matrix.md, "CUDA here").
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from generator.errors import DigestMismatchError, UsageError
from generator.native import build as native
from generator.native import cuda_pypi
from generator.native.cuda_pypi import CUDA_WHEELS, DONE_MARKER
from generator.platforms import get_platform
from generator.smoke import devices
from generator.sources.tree import Tree

CUBLAS_13 = CUDA_WHEELS[13][0]


def _toolkit(tmp_path: Path, version: int = 13000, libs: tuple[str, ...] = ()) -> Path:
    """A toolkit folder as NVIDIA's PyPI wheels lay it out (nvcc, cuda.h, libcudart), plus
    ``libs`` (paths under the root); returns its nvcc."""
    root = tmp_path / "cuda"
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "lib64").mkdir()
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\n", encoding="utf-8")
    (root / "include" / "cuda.h").write_text(f"#define CUDA_VERSION {version}\n", "utf-8")
    (root / "lib64" / "libcudart.so.13").write_bytes(b"")
    for lib in libs:
        (root / lib).parent.mkdir(parents=True, exist_ok=True)
        (root / lib).write_bytes(b"")
    return nvcc


def test_a_cuda_13_toolkit_without_cublas_gets_the_pinned_wheel_and_a_libcuda_stub(
    tmp_path: Path,
) -> None:
    nvcc = _toolkit(tmp_path)
    found = cuda_pypi.resolve(nvcc, [])
    assert found.why_not == ""
    assert found.version == (13, 0) and found.root == tmp_path / "cuda"
    assert found.wheels == (CUBLAS_13,) and found.stub
    assert CUBLAS_13.requirement == "nvidia-cublas==13.0.2.14"
    said = found.describe()
    assert "cuBLAS from PyPI's nvidia-cublas==13.0.2.14" in said
    assert "libcuda for linking from a stub compiled from cuda.h" in said


def test_what_the_toolkit_or_the_system_has_is_used_as_it_is(tmp_path: Path) -> None:
    nvcc = _toolkit(tmp_path, libs=("lib64/libcublas.so.13",))
    found = cuda_pypi.resolve(nvcc, [])
    assert found.wheels == () and found.stub  # cuBLAS there, libcuda still missing
    system = tmp_path / "system"
    system.mkdir()
    (system / "libcuda.so.1").write_bytes(b"")  # the driver's
    found = cuda_pypi.resolve(nvcc, [system])
    assert (found.wheels, found.stub, found.why_not) == ((), False, "")
    assert cuda_pypi.cmake_options(found, tmp_path / "cache") == {}
    assert not (tmp_path / "cache").exists()  # nothing fetched, nothing compiled
    stubbed = _toolkit(tmp_path / "other", libs=("lib64/libcublas.so", "lib64/stubs/libcuda.so"))
    assert cuda_pypi.resolve(stubbed, []).stub is False


def test_a_toolkit_of_an_unpinned_major_without_cublas_is_refused_with_the_reason(
    tmp_path: Path,
) -> None:
    nvcc = _toolkit(tmp_path, version=12040)
    found = cuda_pypi.resolve(nvcc, [])
    assert found.wheels == () and "CUDA 12.4" in found.why_not
    assert "cuBLAS wheels for CUDA 13 only: install the full CUDA toolkit" in found.why_not
    with pytest.raises(cuda_pypi.CudaSetupError, match="needs cuBLAS"):
        cuda_pypi.cmake_options(found, tmp_path / "cache")


def test_without_cuda_h_no_libcuda_stub_can_be_made(tmp_path: Path) -> None:
    nvcc = _toolkit(tmp_path, libs=("lib64/libcublas.so.13",))
    (tmp_path / "cuda" / "include" / "cuda.h").unlink()
    assert "NVIDIA's driver library" in cuda_pypi.resolve(nvcc, []).why_not


def test_an_nvcc_wrapper_script_is_followed_to_its_toolkit(tmp_path: Path) -> None:
    nvcc = _toolkit(tmp_path)
    wrapper = tmp_path / "bin" / "nvcc"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec {nvcc} "$@"\n', encoding="utf-8")
    assert cuda_pypi.toolkit_root(wrapper) == tmp_path / "cuda"
    assert cuda_pypi.resolve(wrapper, []).version == (13, 0)


def _wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_a_wheel_is_unpacked_with_the_links_cmake_looks_for(tmp_path: Path) -> None:
    wheel = _wheel(
        tmp_path / "w.whl",
        {
            "nvidia/cu13/lib/libcublas.so.13": b"blas",
            "nvidia/cu13/lib/libcublasLt.so.13": b"lt",
            "nvidia/cu13/include/cublas_v2.h": b"/* v2 */",
            "nvidia_cublas-13.0.2.14.dist-info/RECORD": b"",
            "nvidia/cu13/lib/../../escape.so": b"no",
        },
    )
    folder = tmp_path / "out"
    cuda_pypi._unpack(wheel, folder)
    assert (folder / "lib" / "libcublas.so").resolve() == folder / "lib" / "libcublas.so.13"
    assert (folder / "lib" / "libcublasLt.so").read_bytes() == b"lt"
    assert (folder / "include" / "cublas_v2.h").is_file()
    assert not (tmp_path / "escape.so").exists() and not (folder / "escape.so").exists()
    assert sorted(p.name for p in folder.iterdir()) == ["include", "lib"]


def test_the_folders_to_load_a_build_without_the_driver_are_the_ones_made(tmp_path: Path) -> None:
    nvcc = _toolkit(tmp_path)
    found = cuda_pypi.resolve(nvcc, [])
    cache = tmp_path / "cache"
    assert cuda_pypi.link_library_dirs(found, cache) == [tmp_path / "cuda" / "lib64"]
    wheel_lib = cache / cuda_pypi.CUDA_PYPI_DIR / CUBLAS_13.folder_name / "lib"
    wheel_lib.mkdir(parents=True)
    stub_dir = cuda_pypi._stub_folder(
        tmp_path / "cuda" / "include" / "cuda.h", wheel_lib.parent.parent
    )
    (stub_dir / cuda_pypi.STUB_LOAD_DIR).mkdir(parents=True)
    assert cuda_pypi.link_library_dirs(found, cache) == [
        tmp_path / "cuda" / "lib64", wheel_lib, stub_dir / cuda_pypi.STUB_LOAD_DIR,
    ]  # fmt: skip


def test_the_options_point_cmake_at_the_unpacked_wheel_and_the_stub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nvcc = _toolkit(tmp_path)
    found = cuda_pypi.resolve(nvcc, [])
    base = tmp_path / "cache" / cuda_pypi.CUDA_PYPI_DIR
    unpacked = base / CUBLAS_13.folder_name
    (unpacked / "include").mkdir(parents=True)
    (unpacked / DONE_MARKER).write_text("done\n", encoding="utf-8")  # as a previous fetch left it
    monkeypatch.setattr(cuda_pypi, "driver_stub", lambda header, base: base / "stub/libcuda.so")
    options = cuda_pypi.cmake_options(found, tmp_path / "cache")
    assert options == {
        "CUDA_cublas_LIBRARY": str(unpacked / "lib" / "libcublas.so"),
        "CUDA_cublasLt_LIBRARY": str(unpacked / "lib" / "libcublasLt.so"),
        "CMAKE_CUDA_STANDARD_INCLUDE_DIRECTORIES": str(unpacked / "include"),
        "CUDA_cuda_driver_LIBRARY": str(base / "stub" / "libcuda.so"),
    }


def test_a_downloaded_wheel_is_held_to_its_pinned_sha256(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    downloads = tmp_path / "wheels"
    downloads.mkdir()
    name = f"nvidia_cublas-{CUBLAS_13.version}-py3-none-manylinux_2_27_x86_64.whl"
    stale = _wheel(downloads / name, {"x": b"a stale copy"})
    calls: list[list[str]] = []

    def fake_pip(args: list[str], what: str) -> None:  # writes a wheel that is not the pinned one
        calls.append(args)
        _wheel(Path(args[args.index("-d") + 1]) / name, {"x": b"not the pinned bytes"})

    monkeypatch.setattr(cuda_pypi, "run_pip", fake_pip)
    with pytest.raises(DigestMismatchError, match="sha256 mismatch: expected 0cf238ff"):
        cuda_pypi.unpacked_wheel(CUBLAS_13, tmp_path)
    assert not stale.exists()  # a cached wheel that is not the pinned one is not used
    assert "--require-hashes" in calls[0] and "--no-deps" in calls[0]
    assert not (tmp_path / CUBLAS_13.folder_name).exists()


def test_the_driver_functions_of_cuda_h_are_read_after_its_macros() -> None:
    preprocessed = (
        "typedef int CUresult;\n"
        "CUresult cuInit(unsigned int Flags);\n"
        "CUresult  cuMemAlloc_v2(void **p, unsigned long n);\n"
        "CUresult cuInit(unsigned int Flags);\n"
        "const char *cudaGetErrorString(int);\n"
    )
    assert cuda_pypi.driver_functions(preprocessed) == ["cuInit", "cuMemAlloc_v2"]


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (g++ in .ci/run)")
def test_the_libcuda_stub_exports_every_driver_function_under_the_driver_s_soname(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    header = tmp_path / "include" / "cuda.h"
    header.parent.mkdir()
    header.write_text(
        "typedef int CUresult;\n#define cuMemAlloc cuMemAlloc_v2\n"
        "CUresult cuInit(unsigned int);\nCUresult cuMemAlloc(void **, unsigned long);\n",
        encoding="utf-8",
    )
    stub = cuda_pypi.driver_stub(header, tmp_path / "cache")
    dynamic = subprocess.run(
        ["readelf", "-Ws", "--dyn-syms", "-d", str(stub)], capture_output=True, text=True
    ).stdout
    assert "Library soname: [libcuda.so.1]" in dynamic
    assert " cuInit" in dynamic and " cuMemAlloc_v2" in dynamic
    assert cuda_pypi.driver_stub(header, tmp_path / "cache") == stub  # made once
    assert not (stub.parent / "libcuda.so.1").exists()  # CMake's folder: link only
    loadable = stub.parent / cuda_pypi.STUB_LOAD_DIR / "libcuda.so.1"
    assert loadable.resolve() == stub.resolve()
    # the smoke tells it from NVIDIA's driver, should it be found where the driver would be
    monkeypatch.setattr(devices.ctypes.util, "find_library", lambda name: str(stub))
    said = devices.driver_missing_reason("cuda")
    assert said is not None and "llama-bindgen's link-time stub, not NVIDIA's driver" in said
    monkeypatch.setattr(devices.ctypes.util, "find_library", lambda name: str(tmp_path / "none"))
    assert "does not load here" in str(devices.driver_missing_reason("cuda"))


@pytest.mark.parametrize(
    ("text", "cmake"), [("89", "89"), ("86-real, 90a", "86-real;90a"), ("120a-real", "120a-real")]
)
def test_cuda_arch_becomes_cmake_s_list(text: str, cmake: str) -> None:
    assert native.cuda_architectures(text, "cuda") == cmake
    assert native.cuda_architectures(None, "cuda") is None  # llama.cpp's own list


@pytest.mark.parametrize("text", ["sm_89", "", "89,", "native", "8"])
def test_a_bad_cuda_arch_is_refused(text: str) -> None:
    with pytest.raises(UsageError, match="expected CUDA architectures"):
        native.cuda_architectures(text, "cuda")


def test_cuda_arch_is_for_the_cuda_backend_only() -> None:
    with pytest.raises(UsageError, match="--cuda-arch is for --backend cuda, not vulkan"):
        native.cuda_architectures("89", "vulkan")


def test_a_cuda_build_for_chosen_architectures_has_its_own_folder_and_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plat = get_platform("linux-x86_64")
    tree = Tree(tmp_path, "b1", "b1", "a" * 40, "", "")
    default = native.build_dir_for(tree, plat, "cuda")
    assert native.build_dir_for(tree, plat, "cuda", "90") not in (default, None)
    nvcc = _toolkit(tmp_path, libs=("lib64/libcublas.so.13", "lib64/stubs/libcuda.so"))
    monkeypatch.setattr(native, "cuda_compiler", lambda: nvcc)
    assert native.backend_cmake_options(plat, "cuda", "90") == {
        "GGML_CUDA": "ON", "CMAKE_CUDA_COMPILER": str(nvcc), "CMAKE_CUDA_ARCHITECTURES": "90",
    }  # fmt: skip
