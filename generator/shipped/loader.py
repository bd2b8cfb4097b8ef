"""Open libllama, ggml, the optional llama_mtp wrapper, and the optional libmtmd and libggml-rpc.

Where the libraries are looked for, first match wins: the ``lib_dir`` argument, then the
folder the environment variable ``LIB_DIR_ENV`` names, then a ``lib/`` folder inside this
package. A library's file names on each system (:func:`file_names`) come from llama-bindgen's
platform registry, through ``_about.LIBRARY_FILE_NAMES``.

Calls go through the compiled cffi API-mode module ``API_MODULE`` when the library folder has one
built from these declarations (``llama-bindgen build`` compiles it where it can: calls cost a
third to two thirds of ABI mode's), else through cffi's ABI mode. The environment variable
``CFFI_MODE_ENV`` (or ``load(mode=...)``) chooses: ``auto`` (the default), ``api`` (the module
is required) or ``abi``. Either way the libraries are opened and checked through the bindings'
``ffi``, whose declarations come pre-parsed (``_ffi.py``), so loading parses no C. The three
names are in ``_about.py``.

libmtmd (llama.cpp's multimodal library) is optional: when these bindings carry it
(``_about.MTMD_API``) and the library folder has it, ``Libraries.mtmd`` is the opened library;
otherwise it is an :class:`UnavailableLibrary`, false in a boolean test, whose functions raise
:class:`LibraryUnavailableError` saying why. Its absence never stops the other libraries loading.
libggml-rpc (ggml's RPC backend, ``ggml-rpc.h``) is optional the same way: ``Libraries.ggml_rpc``
(``_about.GGML_RPC_API``).
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
import warnings
from pathlib import Path

from ._about import (
    API_MODULE,
    CFFI_MODE_ENV,
    GGML_RPC_ABSENT,
    GGML_RPC_API,
    LIBRARY_FILE_NAMES,
    MTMD_ABSENT,
    MTMD_API,
)
from ._about import LIB_DIR_ENV as LIB_DIR_ENV
from ._ffi import CDEF_IDENTITY, SYMBOL_ERRORS, ffi
from .abi_guard import ABI_STEM, check_build_files, check_libraries

# ``typing`` costs milliseconds to import and only type checkers need it (mypy takes any
# ``TYPE_CHECKING`` as true), so it is not imported at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from .api import GgmlLibrary, GgmlRpcLibrary, LlamaLibrary, LlamaMtpLibrary, MtmdLibrary

CFFI_MODES = ("auto", "api", "abi")
API_IDENTITY_FUNCTION = "llama_bindgen_api_identity"
# Opened in this order so that each library finds the ones it links against already loaded.
GGML_STEMS = ("ggml-base", "ggml-cpu", "ggml")
LLAMA_STEM = "llama"
MTP_STEM = "llama_mtp"
MTMD_STEM = "mtmd"
RPC_STEM = "ggml-rpc"  # the file's stem; the library's name (as the manifest has it) is ggml_rpc
RPC_LIBRARY = "ggml_rpc"


class LibraryNotFoundError(OSError):
    """A required shared library is not in the library folder."""


class LibraryUnavailableError(LibraryNotFoundError):
    """A function of an optional library (libmtmd, libggml-rpc) was used, but the library is not
    available:
    these bindings were generated without it, or the library folder does not have it.
    ``library`` names it and ``reason`` says why."""

    def __init__(self, message: str, library: str, reason: str) -> None:
        super().__init__(message)
        self.library = library
        self.reason = reason


class UnavailableLibrary:
    """Stands in for an optional library that is not available: false in a boolean test; any
    function looked up on it raises :class:`LibraryUnavailableError`."""

    __slots__ = ("library", "reason")
    library: str
    reason: str

    def __init__(self, library: str, reason: str) -> None:
        object.__setattr__(self, "library", library)
        object.__setattr__(self, "reason", reason)

    def __bool__(self) -> bool:
        return False

    def __getattr__(self, name: str) -> NoReturn:
        if name.startswith("__"):
            raise AttributeError(name)
        raise LibraryUnavailableError(
            f"{name}: {self.library} is not available: {self.reason}", self.library, self.reason
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, UnavailableLibrary):
            return NotImplemented
        return (self.library, self.reason) == (other.library, other.reason)

    def __hash__(self) -> int:
        return hash((self.library, self.reason))

    def __repr__(self) -> str:
        return f"UnavailableLibrary({self.library!r}, {self.reason!r})"


class ApiModuleError(ImportError):
    """API mode was required but the compiled module is missing, does not load, or was built
    from other declarations than these bindings."""


def file_names(stem: str, platform: str = sys.platform) -> list[str]:
    """File names a library ``stem`` may have on ``platform`` (a ``sys.platform``), best first; a
    ``*`` stands for any version. A system the registry does not know names them as ELF ones."""
    names = LIBRARY_FILE_NAMES.get(platform) or LIBRARY_FILE_NAMES[""]
    return [name.format(stem=stem) for name in names]


def find_library(lib_dir: Path, stem: str) -> Path | None:
    """The first of :func:`file_names` that is a file in ``lib_dir`` (of versioned names, the
    first in sorted order)."""
    for name in file_names(stem):
        if "*" in name:
            versioned = sorted(lib_dir.glob(name))
            if versioned:
                return versioned[0]
        elif (lib_dir / name).is_file():
            return lib_dir / name
    return None


def library_dir(lib_dir: str | os.PathLike[str] | None = None) -> Path:
    if lib_dir is not None:
        return Path(lib_dir)
    env = os.environ.get(LIB_DIR_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parent / "lib"


class _FirstOf:
    """Looks a symbol up in several libraries in turn (ggml is split into several files)."""

    def __init__(self, libraries: list[Any]) -> None:
        self._libraries = libraries

    def __getattr__(self, name: str) -> Any:
        for library in self._libraries:
            try:
                return getattr(library, name)
            except SYMBOL_ERRORS:
                continue
        raise AttributeError(f"no ggml library exports {name!r}")


class Libraries:
    """The opened libraries. ``llama_mtp`` is ``None`` when the wrapper is not present; ``mtmd``
    and ``ggml_rpc`` are an :class:`UnavailableLibrary` (false) when libmtmd or libggml-rpc is
    not.

    Read-only, compared and hashed by its fields (as a frozen dataclass, without importing
    ``dataclasses``, which would cost more than the rest of the package's import)."""

    __slots__ = ("ffi", "ggml", "ggml_rpc", "lib_dir", "llama", "llama_mtp", "mode", "mtmd")
    ffi: Any
    llama: LlamaLibrary
    ggml: GgmlLibrary
    llama_mtp: LlamaMtpLibrary | None
    mtmd: MtmdLibrary | UnavailableLibrary
    ggml_rpc: GgmlRpcLibrary | UnavailableLibrary
    lib_dir: Path
    mode: str  # "abi", or "api": calls go through the compiled module; its ``ffi`` is ``ffi``

    def __init__(
        self,
        ffi: Any,
        llama: LlamaLibrary,
        ggml: GgmlLibrary,
        llama_mtp: LlamaMtpLibrary | None,
        lib_dir: Path,
        mode: str = "abi",
        mtmd: MtmdLibrary | UnavailableLibrary | None = None,
        ggml_rpc: GgmlRpcLibrary | UnavailableLibrary | None = None,
    ) -> None:
        values = {"ffi": ffi, "llama": llama, "ggml": ggml, "llama_mtp": llama_mtp}
        values.update(lib_dir=lib_dir, mode=mode)
        absent = UnavailableLibrary(MTMD_STEM, MTMD_ABSENT or "not opened")
        values["mtmd"] = mtmd if mtmd is not None else absent
        no_rpc = UnavailableLibrary(RPC_LIBRARY, GGML_RPC_ABSENT or "not opened")
        values["ggml_rpc"] = ggml_rpc if ggml_rpc is not None else no_rpc
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Libraries is read-only: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Libraries is read-only: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Libraries):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"Libraries({fields})"


def _open(path: Path) -> Any:
    return ffi.dlopen(str(path))


def _optional_path(
    folder: Path, stem: str, carried: bool, absent: str, what: str
) -> tuple[Path | None, str]:
    """An optional library's file (``stem``) in ``folder`` when these bindings carry it
    (``carried``; else ``absent`` says why) and it is there; else why not."""
    if not carried:
        return None, absent
    path = find_library(folder, stem)
    if path is None:
        names = " or ".join(file_names(stem))
        return None, f"{names} not found in {folder} ({what} is not built or not installed there)"
    return path, ""


def _optional_paths(folder: Path) -> dict[str, tuple[Path | None, str]]:
    """libmtmd's and libggml-rpc's files in ``folder``, or why not, by their names in
    :class:`Libraries` and the manifest (``mtmd``, ``ggml_rpc``)."""
    return {
        MTMD_STEM: _optional_path(folder, MTMD_STEM, MTMD_API, MTMD_ABSENT, "libmtmd"),
        RPC_LIBRARY: _optional_path(folder, RPC_STEM, GGML_RPC_API, GGML_RPC_ABSENT, "libggml-rpc"),
    }


def find_api_module(lib_dir: Path) -> Path | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = lib_dir / f"{API_MODULE}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def _import_api_module(path: Path) -> Any:
    # importlib.machinery's loader directly: importlib.util costs milliseconds to import
    loader = importlib.machinery.ExtensionFileLoader(API_MODULE, str(path))
    spec = importlib.machinery.ModuleSpec(API_MODULE, loader, origin=str(path))
    module = loader.create_module(spec)
    loader.exec_module(module)
    identity = getattr(module.lib, API_IDENTITY_FUNCTION, None)
    found = module.ffi.string(identity()).decode() if identity is not None else "none"
    if found != CDEF_IDENTITY:
        raise ImportError(
            f"{path} was compiled from other declarations ({found[:12]}) than these "
            f"bindings ({CDEF_IDENTITY[:12]}): rebuild it with `llama-bindgen build`"
        )
    return module


def _api_module(folder: Path, mode: str) -> Any | None:
    """The compiled module for ``mode``, or ``None`` for ABI mode (with a warning when one is
    there but cannot be used)."""
    if mode == "abi":
        return None
    path = find_api_module(folder)
    if path is None:
        if mode == "api":
            raise ApiModuleError(
                f"{API_MODULE} (the compiled cffi API-mode module) is not in {folder}: "
                f"`llama-bindgen build` compiles it, or set {CFFI_MODE_ENV}=auto"
            )
        return None
    try:
        return _import_api_module(path)
    except ImportError as exc:
        if mode == "api":
            raise ApiModuleError(str(exc)) from exc
        warnings.warn(f"{exc}; using cffi ABI mode", RuntimeWarning, stacklevel=3)
        return None


def load(
    lib_dir: str | os.PathLike[str] | None = None,
    *,
    check_abi: bool = True,
    mode: str | None = None,
) -> Libraries:
    """Open the libraries from ``lib_dir``, the folder ``LIB_DIR_ENV`` names or the package's
    ``lib/``.

    Unless ``check_abi`` is false, :func:`abi_guard.check_build_files` first ties every library
    file to its build's ``build-info.json`` (sha256, before anything is loaded; raises
    ``ForeignLibraryError``), then :func:`abi_guard.check_libraries` verifies that they were
    built from the llama.cpp commit and struct layouts these bindings describe, and export every
    declared function; it raises ``AbiMismatchError`` or ``MissingSymbolError`` otherwise.
    Both are done once per version of the files: a set that passed is sealed by the files'
    identities (:mod:`verified_files`; ``$LLAMA_BINDGEN_VERIFIED_CACHE=off`` checks every time).
    ``mode`` (default: what ``CFFI_MODE_ENV`` says, else ``auto``) picks API or ABI mode (see the
    module docstring); use the returned ``ffi`` with the returned libraries.
    """
    chosen = mode if mode is not None else os.environ.get(CFFI_MODE_ENV, "auto")
    if chosen not in CFFI_MODES:
        raise ValueError(f"cffi mode {chosen!r}: expected one of {', '.join(CFFI_MODES)}")
    folder = library_dir(lib_dir)
    if not folder.is_dir():
        raise LibraryNotFoundError(f"library folder {folder} does not exist")
    if sys.platform == "win32":
        os.add_dll_directory(str(folder.resolve()))
    ggml_paths = []
    for stem in (*GGML_STEMS, LLAMA_STEM):
        path = find_library(folder, stem)
        if path is None:
            raise LibraryNotFoundError(f"{' or '.join(file_names(stem))} not found in {folder}")
        ggml_paths.append(path)
    llama_path = ggml_paths.pop()
    mtp_path = find_library(folder, MTP_STEM)
    optional_paths = _optional_paths(folder)
    if check_abi:
        # every file tied to the build record before any of them is loaded (and runs code)
        optional = [find_library(folder, ABI_STEM), mtp_path]
        optional += [path for path, _ in optional_paths.values()]
        if chosen != "abi":
            optional.append(find_api_module(folder))
        sealed = check_build_files(
            folder, [*ggml_paths, llama_path, *(p for p in optional if p is not None)]
        )
    ggml_libraries = [_open(path) for path in ggml_paths]
    llama = _open(llama_path)
    mtp = _open(mtp_path) if mtp_path is not None else None
    opened = {name: _open(path) for name, (path, _) in optional_paths.items() if path is not None}
    ggml: Any = _FirstOf(ggml_libraries[::-1])
    if check_abi:
        exporters: dict[str, Any] = {"llama": llama, "ggml": ggml, **opened}
        if mtp is not None:
            exporters["llama_mtp"] = mtp
        check_libraries(folder, find_library, exporters, sealed)
    absent = {name: UnavailableLibrary(name, why) for name, (_, why) in optional_paths.items()}
    api = _api_module(folder, chosen)
    if api is not None:
        return Libraries(
            ffi=api.ffi,
            llama=api.lib,
            ggml=api.lib,
            llama_mtp=api.lib if mtp is not None else None,
            lib_dir=folder,
            mode="api",
            **{name: api.lib if name in opened else absent[name] for name in absent},
        )
    return Libraries(
        ffi=ffi,
        llama=llama,
        ggml=ggml,
        llama_mtp=mtp,
        lib_dir=folder,
        **{name: opened.get(name, absent[name]) for name in absent},
    )
