"""CUDA wheels on small ELF libraries gcc links here the way ggml-cuda is linked (the CUDA
runtime, cuBLAS and NVIDIA's driver library as DT_NEEDED, each a link-time stub with NVIDIA's
soname): the wheel's name and NVIDIA requirements per CUDA major, auditwheel leaving NVIDIA's
libraries out, the RPATH to where pip installs NVIDIA's wheels, and each refusal.

The wheel of the real b11312 CUDA build, installed offline with NVIDIA's real wheels into a fresh
virtual environment, is ``tests/release/test_cuda_wheel_install.py`` (``nox -s cuda_wheel``)."""

from __future__ import annotations

import email.parser
import hashlib
import json
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from generator.release import cuda_wheels
from generator.release.native import NativeBuild
from generator.release.wheels import (
    WheelNotMadeError,
    distribution_name,
    make_wheel,
    planned_wheels,
)
from tests.release.fixtures import COMMIT, TAG


def _library(folder: Path, soname: str, *links: str) -> Path:
    """``folder/soname``, a shared library gcc links with ``links`` as linker arguments."""
    folder.mkdir(parents=True, exist_ok=True)
    c_file = folder.parent / f"{folder.name}-{soname}.c"
    symbol = re.sub(r"\W", "_", soname)
    c_file.write_text(f"int {symbol}_value(void) {{ return 1; }}\n")
    out = folder / soname
    proc = subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(out), str(c_file), f"-Wl,-soname,{soname}", *links],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out


def _nvidia_stubs(folder: Path, major: int) -> list[str]:
    """Link-time stand-ins for NVIDIA's runtime, cuBLAS and driver of CUDA ``major``: the
    linker arguments that make a library need them."""
    for soname in (f"libcudart.so.{major}", f"libcublas.so.{major}", f"libcublasLt.so.{major}",
                   cuda_wheels.DRIVER_LIBRARY):  # fmt: skip
        _library(folder, soname)
        (folder / (soname.split(".so")[0] + ".so")).symlink_to(soname)
    return [f"-L{folder}", "-Wl,--no-as-needed", "-lcudart", "-lcublas", "-lcublasLt", "-lcuda"]


def _cuda_build(root: Path, major: int = 13, toolkit: str | None = "13.0") -> NativeBuild:
    """A build folder shaped like `llama-bindgen build --backend cuda`'s: libllama.so and a
    libggml-cuda.so that needs libllama (by ``$ORIGIN``) and NVIDIA's libraries."""
    lib = root / "build" / "lib"
    llama = _library(lib, "libllama.so")
    links = _nvidia_stubs(root / "nvidia-stubs", major)
    _library(lib, "libggml-cuda.so", str(llama), "-Wl,-rpath,$ORIGIN", *links)
    info: dict[str, object] = {
        "platform": "linux-x86_64", "backend": "cuda", "tag": TAG, "commit": COMMIT,
        "libraries": {
            f"lib/{p.name}": hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(lib.iterdir()) if p.suffix == ".so"
        },
    }  # fmt: skip
    if toolkit is not None:
        info["cuda_toolkit"] = toolkit
    (root / "build" / "licenses").mkdir()
    (root / "build" / "licenses" / "LICENSE-llama.cpp").write_text("MIT License (llama.cpp)\n")
    (root / "build" / "build-info.json").write_text(json.dumps(info, sort_keys=True) + "\n")
    return NativeBuild(root / "build", "linux-x86_64", "cuda", info)


def _package(root: Path) -> Path:
    package = root / "package"
    package.mkdir()
    (package / "__init__.py").write_text('"""bindings"""\n')
    return package


def _wheel(tmp_path: Path, major: int = 13, toolkit: str | None = "13.0") -> Path:
    build = _cuda_build(tmp_path, major, toolkit)
    (tmp_path / "dist").mkdir()
    return make_wheel(build, _package(tmp_path), TAG, tmp_path / "dist").path


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(archive.read(name).decode())


def _unpacked_library(wheel: Path, name: str, dest: Path) -> Path:
    with zipfile.ZipFile(wheel) as archive:
        archive.extract(f"llama_bindings/lib/{name}", dest)
    return dest / "llama_bindings" / "lib" / name


def test_a_cuda_13_wheel_depends_on_nvidia_s_wheels_and_finds_them(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    assert wheel.name.startswith(f"llama_bindings_cu13-{TAG[1:]}."), wheel.name
    assert "manylinux_" in wheel.name and wheel.name.endswith("_x86_64.whl")
    meta = _metadata(wheel)
    assert meta["Name"] == "llama-bindings-cu13"
    assert sorted(r for r in meta.get_all("Requires-Dist") or [] if "extra ==" not in r) == [
        "cffi>=1.16", "nvidia-cublas>=13.0,<14", "nvidia-cuda-runtime>=13.0,<14",
    ]  # fmt: skip
    with zipfile.ZipFile(wheel) as archive:
        shipped = {Path(n).name for n in archive.namelist() if "/lib/" in n}
    assert shipped == {"libllama.so", "libggml-cuda.so"}  # nothing of NVIDIA's grafted in
    cuda = _unpacked_library(wheel, "libggml-cuda.so", tmp_path / "x")
    assert cuda_wheels.runpath(cuda) == ("$ORIGIN", "$ORIGIN/../../nvidia/cu13/lib")
    assert {"libcudart.so.13", "libcublas.so.13", "libcuda.so.1"} <= set(cuda_wheels.needed(cuda))
    llama = _unpacked_library(wheel, "libllama.so", tmp_path / "x")
    assert "nvidia" not in ":".join(cuda_wheels.runpath(llama))  # needs nothing of NVIDIA's


def test_a_cuda_12_wheel_names_each_of_nvidia_s_folders(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, major=12, toolkit="12.4")
    assert wheel.name.startswith("llama_bindings_cu12-")
    required = _metadata(wheel).get_all("Requires-Dist") or []
    assert sorted(r for r in required if "extra ==" not in r)[1:] == [
        "nvidia-cublas-cu12>=12.4,<13", "nvidia-cuda-runtime-cu12>=12.4,<13",
    ]  # fmt: skip
    cuda = _unpacked_library(wheel, "libggml-cuda.so", tmp_path / "x")
    assert cuda_wheels.runpath(cuda)[1:] == (
        "$ORIGIN/../../nvidia/cuda_runtime/lib", "$ORIGIN/../../nvidia/cublas/lib",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("major", "toolkit", "words"),
    [
        (13, None, "does not say which CUDA toolkit compiled it"),
        (13, "12.4", "says CUDA 12.4 compiled it, but its libraries link libcudart.so.13"),
        (11, "11.8", "knows NVIDIA's PyPI wheels for CUDA 12, 13 only"),
    ],
)
def test_a_cuda_wheel_nvidia_s_wheels_cannot_serve_is_refused(
    tmp_path: Path, major: int, toolkit: str | None, words: str
) -> None:
    with pytest.raises(WheelNotMadeError, match=re.escape(words)):
        _wheel(tmp_path, major, toolkit)
    assert not any((tmp_path / "dist").iterdir())


def test_libraries_of_two_cuda_majors_are_refused(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    one = _library(lib, "liba.so", *_nvidia_stubs(tmp_path / "s13", 13))
    two = _library(lib, "libb.so", *_nvidia_stubs(tmp_path / "s12", 12))
    with pytest.raises(
        cuda_wheels.CudaWheelError, match=re.escape("libcudart.so.12, libcudart.so.13")
    ):
        cuda_wheels.cuda_major([one, two])


def test_the_check_names_a_vendored_runtime_and_a_missing_rpath(tmp_path: Path) -> None:
    nvidia = cuda_wheels.NVIDIA_WHEELS[13]
    lib = tmp_path / "lib"
    _library(lib, "libggml-cuda.so", *_nvidia_stubs(tmp_path / "stubs", 13))
    _library(lib, "libcudart.so.13")
    problems = cuda_wheels.check_libraries(lib, nvidia)
    assert "libcudart.so.13 is NVIDIA's and must come from its wheel, not this one" in problems
    assert any("libggml-cuda.so needs" in p and "lacks $ORIGIN/../../nvidia/cu13/lib" in p
               for p in problems), problems  # fmt: skip
    (lib / "libcudart.so.13").unlink()
    assert cuda_wheels.link_to_nvidia_wheels(lib, nvidia) == ["libggml-cuda.so"]
    assert cuda_wheels.check_libraries(lib, nvidia) == []


def test_names_a_release_plans_for_cuda() -> None:
    assert distribution_name("cuda", 13) == "llama-bindings-cu13"
    assert distribution_name("vulkan") == "llama-bindings-vulkan"
    (line,) = planned_wheels(TAG, ["linux-x86_64-cuda"])
    assert line.startswith("- linux-x86_64-cuda: `llama_bindings_cu13-11312."), line
