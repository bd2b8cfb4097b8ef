"""What a CUDA build takes from PyPI when the CUDA toolkit here lacks it.

ggml-cuda links the CUDA runtime (``libcudart``, which every toolkit with nvcc has: CMake's
CUDA compiler check links it), cuBLAS (``libcublas``, ``libcublasLt``) and, for its
virtual-memory pool, NVIDIA's driver library (``libcuda``). A toolkit made of NVIDIA's PyPI
wheels (``nvidia-cuda-nvcc``, ``nvidia-cuda-runtime`` and their headers, as on this project's
machines) has no cuBLAS and no ``lib/stubs/libcuda.so``. Then:

* NVIDIA's cuBLAS wheel (``nvidia-cublas``) for the toolkit's major version, pinned below by
  version and sha256, is downloaded with ``pip download --no-deps --require-hashes`` into
  ``<cache>/cuda-pypi/wheels/`` and unpacked under
  ``<cache>/cuda-pypi/<package>-<version>/`` (``lib/`` with the unversioned ``.so`` links CMake
  looks for, and ``include/``);
* the link-time stub of ``libcuda`` is compiled from the toolkit's ``cuda.h`` (every driver
  function it declares, each returning an error; soname ``libcuda.so.1`` as NVIDIA's stub has),
  under ``<cache>/cuda-pypi/libcuda-stub-<cuda.h sha256 12>/``. It is for linking only: at run
  time the machine's NVIDIA driver provides ``libcuda.so.1``; it is never shipped.

CMake is pointed at them with FindCUDAToolkit's own cache variables (``CUDA_cublas_LIBRARY``,
``CUDA_cublasLt_LIBRARY``, ``CUDA_cuda_driver_LIBRARY``) and the headers' folder with
``CMAKE_CUDA_STANDARD_INCLUDE_DIRECTORIES``. What the toolkit has is used as it is.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from generator.errors import BindgenError
from generator.hashing import file_sha256
from generator.paths import default_cache_dir
from generator.sources.providers import run_pip, sha256_mismatch

CUDA_PYPI_DIR = "cuda-pypi"
DONE_MARKER = ".complete"
# Folders below a toolkit root (or the system's) where its libraries are.
LIBRARY_SUBDIRS: tuple[str, ...] = ("lib64", "targets/x86_64-linux/lib", "lib")
STUB_SUBDIRS: tuple[str, ...] = tuple(f"{sub}/stubs" for sub in LIBRARY_SUBDIRS)
_VERSION = re.compile(r"^#define CUDA_VERSION (\d+)", re.MULTILINE)
# A driver entry point in the preprocessed cuda.h: "CUresult cuMemCreate(" (macros resolved, so
# cuMemAlloc appears as the exported cuMemAlloc_v2).
_DRIVER_FUNCTION = re.compile(r"\bCUresult\s+(cu[A-Z]\w*)\s*\(")
# Exported by the stub only: tells it from NVIDIA's driver (``smoke.devices``).
STUB_MARKER = "llama_bindgen_libcuda_link_stub"
STUB_FORMAT = 2  # in the stub's folder name: a new format is compiled anew
STUB_LOAD_DIR = "load"  # libcuda.so.1 -> ../libcuda.so, for loading a build without the driver


class CudaSetupError(BindgenError):
    """The CUDA libraries a build needs could not be provided."""

    exit_code = 3


@dataclass(frozen=True)
class CudaWheel:
    """One of NVIDIA's library wheels: what it provides (CMake's names for them, the files)."""

    package: str
    version: str
    sha256: str  # of the wheel, as downloaded
    libraries: tuple[tuple[str, str], ...]  # (FindCUDAToolkit cache variable, lib file name)

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def folder_name(self) -> str:
        return f"{self.package}-{self.version}"


# Per CUDA major version: a cuBLAS of that major's first release (13.0), so it is not
# newer than the runtime and nvcc it is used with. sha256 of the wheel as downloaded.
CUDA_WHEELS: dict[int, tuple[CudaWheel, ...]] = {
    13: (
        CudaWheel(
            "nvidia-cublas",
            "13.0.2.14",
            "0cf238ffdbe46c00cb9aa98e7bca745c223a5ca5a53e686ac8b3e5a08fe80d6c",
            (
                ("CUDA_cublas_LIBRARY", "libcublas.so.13"),
                ("CUDA_cublasLt_LIBRARY", "libcublasLt.so.13"),
            ),
        ),
    ),
}


def _progress(message: str) -> None:
    print(f"cuda: {message}", file=sys.stderr, flush=True)


def toolkit_root(compiler: Path) -> Path:
    """The toolkit an nvcc belongs to (``<root>/bin/nvcc``; a wrapper script on PATH that
    ``exec``s another nvcc is followed to that one)."""
    resolved = compiler.resolve()
    try:
        text = resolved.read_text(encoding="utf-8") if resolved.stat().st_size < 4096 else ""
    except (OSError, UnicodeDecodeError):
        text = ""
    found = re.search(r"^exec\s+\"?(/\S+/bin/nvcc)\"?", text, re.MULTILINE)
    if found:
        resolved = Path(found.group(1)).resolve()
    return resolved.parent.parent


def toolkit_version(root: Path) -> tuple[int, int] | None:
    """(major, minor) from the toolkit's ``cuda.h`` (None when it has none)."""
    header = cuda_header(root)
    if header is None:
        return None
    found = _VERSION.search(header.read_text(encoding="utf-8", errors="replace"))
    if not found:
        return None
    number = int(found.group(1))
    return number // 1000, number % 1000 // 10


def cuda_header(root: Path) -> Path | None:
    for include in (root / "include", root / "targets" / "x86_64-linux" / "include"):
        if (include / "cuda.h").is_file():
            return include / "cuda.h"
    return None


def library_found(folders: list[Path], name: str) -> bool:
    """Whether ``lib<name>.so`` (or a versioned one) is in one of ``folders``."""
    return any(any(folder.glob(f"lib{name}.so*")) for folder in folders if folder.is_dir())


@dataclass(frozen=True)
class CudaResolution:
    """Where a CUDA build's libraries come from: the toolkit (and system) or PyPI."""

    root: Path
    version: tuple[int, int] | None
    wheels: tuple[CudaWheel, ...]  # to fetch: the toolkit lacks what they provide
    stub: bool  # the toolkit has no libcuda (nor its stub): one is compiled
    why_not: str  # "" when the build can go ahead

    def describe(self) -> str:
        """Words for the progress line: where cuBLAS, the runtime and libcuda come from."""
        if self.why_not:
            return self.why_not
        cublas = ", ".join(f"PyPI's {w.requirement}" for w in self.wheels) or "the toolkit"
        driver = "a stub compiled from cuda.h" if self.stub else "the toolkit or the driver"
        return (
            f"CUDA {_version_text(self.version)} at {self.root}: cuBLAS from {cublas}, the "
            f"runtime from the toolkit, libcuda for linking from {driver}"
        )


def _version_text(version: tuple[int, int] | None) -> str:
    return f"{version[0]}.{version[1]}" if version else "(version unknown)"


def resolve(
    compiler: Path, system_dirs: list[Path], extra_roots: tuple[Path, ...] = ()
) -> CudaResolution:
    """Decide, without downloading or compiling anything, what the toolkit of ``compiler`` has
    and what is taken from PyPI (or compiled) instead."""
    root = toolkit_root(compiler)
    version = toolkit_version(root)
    roots = (root, *extra_roots)
    folders = [r / sub for r in roots for sub in LIBRARY_SUBDIRS] + list(system_dirs)
    stubs = [r / sub for r in roots for sub in STUB_SUBDIRS]
    lacking = not library_found(folders, "cublas")
    stub = not library_found(folders + stubs, "cuda")
    if not lacking and not stub:
        return CudaResolution(root, version, (), False, "")
    pinned = CUDA_WHEELS.get(version[0]) if version else None
    if lacking and pinned is None:
        return CudaResolution(root, version, (), stub, (
            f"a CUDA build needs cuBLAS (ggml-cuda links it), and the toolkit of {compiler} "
            f"(CUDA {_version_text(version)}) has no libcublas; llama-bindgen pins NVIDIA's "
            f"cuBLAS wheels for CUDA {', '.join(str(m) for m in sorted(CUDA_WHEELS))} only: "
            "install the full CUDA toolkit"
        ))  # fmt: skip
    if stub and cuda_header(root) is None:
        return CudaResolution(root, version, (), stub, (
            "a CUDA build links NVIDIA's driver library (libcuda, for ggml's virtual-memory "
            f"pool): neither the driver nor the toolkit's stub is there for {compiler}, and its "
            "toolkit has no cuda.h to make a stub from"
        ))  # fmt: skip
    wheels = tuple(pinned or ()) if lacking else ()
    return CudaResolution(root, version, wheels, stub, "")


def cmake_options(resolution: CudaResolution, cache: Path | None = None) -> dict[str, str]:
    """Fetch (or reuse) what ``resolution`` takes from PyPI, compile the stub when it needs one,
    and return the CMake options that point FindCUDAToolkit at them."""
    if resolution.why_not:
        raise CudaSetupError(resolution.why_not)
    base = (cache or default_cache_dir()) / CUDA_PYPI_DIR
    options: dict[str, str] = {}
    includes: list[str] = []
    for wheel in resolution.wheels:
        root = unpacked_wheel(wheel, base)
        for variable, file_name in wheel.libraries:
            options[variable] = str(root / "lib" / file_name.split(".so")[0]) + ".so"
        if (root / "include").is_dir():
            includes.append(str(root / "include"))
    if includes:
        options["CMAKE_CUDA_STANDARD_INCLUDE_DIRECTORIES"] = ";".join(includes)
    if resolution.stub:
        header = cuda_header(resolution.root)
        assert header is not None  # resolve() refused a toolkit without one
        options["CUDA_cuda_driver_LIBRARY"] = str(driver_stub(header, base))
    return options


def unpacked_wheel(wheel: CudaWheel, base: Path) -> Path:
    """``<base>/<package>-<version>/`` with the wheel's ``lib/`` and ``include/``; downloaded,
    held to its sha256 and unpacked the first time."""
    folder = base / wheel.folder_name
    if (folder / DONE_MARKER).is_file():
        return folder
    downloads = base / "wheels"
    downloads.mkdir(parents=True, exist_ok=True)
    path = _download(wheel, downloads)
    if folder.exists():
        shutil.rmtree(folder)
    _unpack(path, folder)
    (folder / DONE_MARKER).write_text(f"{wheel.requirement} {wheel.sha256}\n", encoding="utf-8")
    _progress(f"{wheel.requirement}: unpacked in {folder}")
    return folder


def _download(wheel: CudaWheel, downloads: Path) -> Path:
    stem = wheel.package.replace("-", "_")
    for candidate in sorted(downloads.glob(f"{stem}-{wheel.version}-*.whl")):
        if file_sha256(candidate) == wheel.sha256:
            return candidate
        candidate.unlink()
    _progress(f"pip download {wheel.requirement} (pinned sha256 {wheel.sha256[:12]})")
    with tempfile.TemporaryDirectory(dir=downloads, prefix=".pip-") as tmp:
        requirements = Path(tmp) / "requirements.txt"
        requirements.write_text(f"{wheel.requirement} --hash=sha256:{wheel.sha256}\n", "utf-8")
        run_pip(
            ["download", "--no-deps", "--only-binary", ":all:", "--require-hashes",
             "-d", tmp, "-r", str(requirements)],
            f"pip download {wheel.requirement}",
        )  # fmt: skip
        found = sorted(Path(tmp).glob(f"{stem}-{wheel.version}-*.whl"))
        if not found:
            raise CudaSetupError(f"pip download {wheel.requirement} produced no wheel")
        got = file_sha256(found[0])
        if got != wheel.sha256:
            raise sha256_mismatch(found[0].name, wheel.sha256, got)
        target = downloads / found[0].name
        os.replace(found[0], target)
    return target


def _unpack(path: Path, folder: Path) -> None:
    """The wheel's ``nvidia/cu<N>/{lib,include}`` into ``folder/{lib,include}``, plus the
    unversioned ``lib<name>.so`` links CMake's find_library looks for."""
    member = re.compile(r"^nvidia/cu\d+/(lib|include)/([^/].*)$")
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            found = member.match(info.filename)
            if not found or info.is_dir() or ".." in Path(found.group(2)).parts:
                continue
            dest = folder / found.group(1) / found.group(2)
            dest.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out)
    for library in sorted((folder / "lib").glob("lib*.so.*")):
        link = library.with_name(library.name.split(".so")[0] + ".so")
        if not link.exists():
            link.symlink_to(library.name)


def driver_functions(preprocessed: str) -> list[str]:
    """The driver entry points a preprocessed ``cuda.h`` declares, sorted, each once."""
    return sorted(set(_DRIVER_FUNCTION.findall(preprocessed)))


def stub_source(functions: list[str]) -> str:
    lines = ["/* Link-time stub of NVIDIA's libcuda (made by llama-bindgen; never run). */"]
    lines += [f"int {name}(void) {{ return 999; }}" for name in functions]  # CUDA_ERROR_UNKNOWN
    lines.append(f"int {STUB_MARKER}(void) {{ return 1; }}")
    return "\n".join(lines) + "\n"


def _stub_folder(header: Path, base: Path) -> Path:
    """One stub per cuda.h (its sha256's first 12 digits) and stub format."""
    return base / f"libcuda-stub-v{STUB_FORMAT}-{file_sha256(header)[:12]}"


def driver_stub(header: Path, base: Path, compiler: str = "cc") -> Path:
    """``libcuda.so`` (soname ``libcuda.so.1``) with every driver function of ``header``."""
    folder = _stub_folder(header, base)
    library = folder / "libcuda.so"
    if (folder / DONE_MARKER).is_file() and library.is_file():
        return library
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    _progress(f"no libcuda here: compiling a link-time stub from {header} into {folder}")
    preprocessed = _run([compiler, "-E", "-P", "-I", str(header.parent), str(header)])
    functions = driver_functions(preprocessed)
    if not functions:
        raise CudaSetupError(f"{header} declares no driver function (CUresult cu...())")
    source = folder / "libcuda_stub.c"
    source.write_text(stub_source(functions), encoding="utf-8")
    _run([compiler, "-shared", "-fPIC", "-O0", "-Wl,-soname,libcuda.so.1", "-o", str(library),
          str(source)])  # fmt: skip
    # the name the loader asks for, apart from the folder CMake links from (as NVIDIA's stubs/
    # has no libcuda.so.1): only what names this folder loads the stub
    (folder / STUB_LOAD_DIR).mkdir()
    (folder / STUB_LOAD_DIR / "libcuda.so.1").symlink_to(Path("..") / library.name)
    (folder / DONE_MARKER).write_text(f"{len(functions)} functions\n", encoding="utf-8")
    return library


def link_library_dirs(resolution: CudaResolution, cache: Path | None = None) -> list[Path]:
    """The folders holding what a CUDA build here was linked against (the toolkit's runtime,
    the unpacked cuBLAS wheel, the libcuda stub), for loading the build on a machine without
    NVIDIA's driver: enough for ABI checks, never a device (the stub's functions all fail).
    Only folders already made are named; nothing is fetched or compiled."""
    base = (cache or default_cache_dir()) / CUDA_PYPI_DIR
    folders = [resolution.root / sub for sub in LIBRARY_SUBDIRS]
    folders += [base / wheel.folder_name / "lib" for wheel in resolution.wheels]
    header = cuda_header(resolution.root) if resolution.stub else None
    if header is not None:
        folders.append(_stub_folder(header, base) / STUB_LOAD_DIR)
    return [folder for folder in folders if folder.is_dir()]


def _run(argv: list[str]) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise CudaSetupError(f"{argv[0]}: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise CudaSetupError(f"{' '.join(argv[:2])} failed: {tail[0]}")
    return proc.stdout
