"""macOS wheels made off macOS: the libraries' Mach-O load commands, read with macholib.

The macOS builds are linked with install names ``@rpath/<file>`` and an ``LC_RPATH`` of
``@loader_path`` (``platforms.MACOS_LINK_OPTIONS``, CMake options of both macOS toolchains, set
at link time: no ``install_name_tool`` runs off macOS), so a library finds the others in the
folder it was loaded from: the wheel's ``llama_bindings/lib/``. What delocate does on a Mac
(copy every dependency outside the system into the wheel and rename it) is left with nothing
to do: zig links its libc++ into each library. :func:`check_libraries` holds every library in
a wheel to that, and :func:`platform_tag` reads the wheel's tag from the libraries' minimum
macOS version (``LC_BUILD_VERSION``, or ``LC_VERSION_MIN_MACOSX`` from older linkers).

Built here, a macOS wheel has not been smoke-tested (no macOS machine or emulator here): only a
release, whose builds passed every gate on a macOS runner, ships one; ``llama-bindgen wheel``
makes one of an ungated build and says so in its ``build-info.json``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from macholib import mach_o
from macholib.MachO import MachO

# The macOS loader's own libraries: a dependency below these is the system's.
SYSTEM_PREFIXES = ("/usr/lib/", "/System/Library/")
RPATH_PREFIX = "@rpath/"
LOADER_PATH = "@loader_path"
_DEPENDENCY_COMMANDS = {
    "LC_LOAD_DYLIB",
    "LC_LOAD_WEAK_DYLIB",
    "LC_REEXPORT_DYLIB",
    "LC_LOAD_UPWARD_DYLIB",
    "LC_LAZY_LOAD_DYLIB",
}


class MachoError(ValueError):
    """A file is not a Mach-O library macholib can read."""


@dataclass(frozen=True)
class MachoLinks:
    """What the macOS loader reads from one library to find it and what it needs."""

    install_name: str  # LC_ID_DYLIB ("" for a bundle, such as a Python extension)
    dependencies: tuple[str, ...]
    rpaths: tuple[str, ...]
    min_macos: tuple[int, int]  # (major, minor); (0, 0) when the file states none


def _text(data: bytes) -> str:
    return data.split(b"\0", 1)[0].decode("utf-8", errors="replace")


def _version(packed: int) -> tuple[int, int]:
    return packed >> 16, (packed >> 8) & 0xFF


def read_links(path: Path) -> MachoLinks:
    """The install name, dependencies, rpaths and minimum macOS of ``path`` (every architecture
    of a universal file together)."""
    try:
        headers = MachO(str(path)).headers
    except (ValueError, OSError, KeyError) as exc:
        raise MachoError(f"{path.name}: not a Mach-O file macholib reads ({exc})") from exc
    install_name, dependencies, rpaths, floor = "", [], [], (0, 0)
    for header in headers:
        for load, command, data in header.commands:
            kind = mach_o.LC_NAMES.get(load.cmd, "")
            if kind == "LC_ID_DYLIB":
                install_name = _text(data)
            elif kind in _DEPENDENCY_COMMANDS:
                dependencies.append(_text(data))
            elif kind == "LC_RPATH":
                rpaths.append(_text(data))
            elif kind == "LC_BUILD_VERSION":
                floor = max(floor, _version(command.minos))
            elif kind == "LC_VERSION_MIN_MACOSX":
                floor = max(floor, _version(command.version))
    return MachoLinks(install_name, tuple(dependencies), tuple(rpaths), floor)


def wheel_name(path: Path) -> str:
    """The name a library takes in the wheel: the last part of its install name, the name the
    other libraries ask for (as an ELF library goes under its SONAME)."""
    name = read_links(path).install_name
    return name.rsplit("/", 1)[-1] if name else path.name


def _problems(name: str, links: MachoLinks, shipped: set[str]) -> Iterable[str]:
    if links.install_name and links.install_name != RPATH_PREFIX + name:
        yield f"{name}: install name {links.install_name!r}, not {RPATH_PREFIX}{name}"
    needs_rpath = False
    for dependency in links.dependencies:
        if dependency.startswith(SYSTEM_PREFIXES):
            continue
        if not dependency.startswith(RPATH_PREFIX):
            yield f"{name}: needs {dependency!r}, neither in the wheel nor macOS's"
        elif dependency.removeprefix(RPATH_PREFIX) not in shipped:
            yield f"{name}: needs {dependency!r}, which the wheel does not hold"
        else:
            needs_rpath = True
    if needs_rpath and LOADER_PATH not in links.rpaths:
        yield f"{name}: loads @rpath/ libraries but has no {LOADER_PATH} rpath ({links.rpaths})"


def check_libraries(libraries: Iterable[Path]) -> list[str]:
    """Why a macOS loader would not resolve these libraries inside one folder ([] when it
    would): every dependency is in the folder (by ``@rpath/`` with an ``@loader_path`` rpath)
    or is macOS's own, and every install name is ``@rpath/`` and its file name."""
    paths = sorted(libraries)
    shipped = {p.name for p in paths}
    problems: list[str] = []
    for path in paths:
        try:
            problems += _problems(path.name, read_links(path), shipped)
        except MachoError as exc:
            problems.append(str(exc))
    return problems


def platform_tag(libraries: Iterable[Path], machine: str) -> str:
    """``macosx_<major>_<minor>_<machine>`` for the highest minimum macOS of the libraries
    (from macOS 11 on, a wheel tag's minor version is 0, as pip and packaging read them)."""
    floor = max((read_links(p).min_macos for p in libraries), default=(0, 0))
    if floor == (0, 0):
        raise MachoError("no library states a minimum macOS version")
    major, minor = floor
    return f"macosx_{major}_{minor if major < 11 else 0}_{machine}"
