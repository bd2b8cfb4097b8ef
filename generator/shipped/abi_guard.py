"""The load-time ABI guard: refuse libraries these bindings were not generated for.

Before any struct crosses the boundary, :func:`check_libraries` reads the ABI identity library that
``llama-bindgen build`` compiles beside libllama from the same headers with the same compiler
(``llama_bindgen_abi``): the llama.cpp commit and the size, alignment and field offsets of every
struct, union and enum as that compiler laid them out. They must equal what ``abi_manifest.json``
records for this platform (read from ``_abi_expected.py``, the same values worked out when the
bindings were generated, so that no JSON is parsed at load), and every function that ``llama.h``,
the MTP wrapper and (when the folder has them) mtmd's headers and ``ggml-rpc.h`` declare must be
exported (ggml's headers declare functions that no build defines, e.g. in b11312
``ggml_threadpool_get_n_threads``; the release gates report those per platform). Otherwise a typed
error names what was expected and what was found. Before any of them is opened,
:func:`check_build_files` ties every library file to that build: each must be one that the build's
``build-info.json`` (in the library folder or its parent, as ``llama-bindgen build`` and the release
archives lay it out) records, with the recorded sha256, so a libllama swapped in from another build
is refused before it runs. Both checks are done once per version of the files: :mod:`verified_files`
seals a set that passed by the files' identities (device, inode, size, modification and change
times) and these bindings' ``GUARD_IDENTITY``, and a file that changes is hashed and compared again.
Experts can skip the checks with ``load(..., check_abi=False)`` or by setting the environment
variable ``SKIP_ABI_CHECK_ENV`` (``_about.py``) to ``1``: a mismatched layout then corrupts memory.
Which layouts describe the running platform (:func:`runtime_targets`) comes from llama-bindgen's
platform registry, through ``_about.RUNTIME_TARGETS``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import verified_files
from ._about import RUNTIME_TARGETS, SKIP_ABI_CHECK_ENV
from ._ffi import GUARD_IDENTITY, SYMBOL_ERRORS, ffi

# ``typing`` costs milliseconds to import and only type checkers need it (mypy takes any
# ``TYPE_CHECKING`` as true), so it is not imported at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

BUILD_INFO = "build-info.json"
ABI_STEM = "llama_bindgen_abi"
_SHOWN = 12
# Libraries whose every declared function must be exported (see the module docstring).
STRICT_LIBRARIES = ("llama", "llama_mtp", "mtmd", "ggml_rpc")


class BindingsAbiError(ImportError):
    """The opened libraries do not match these bindings."""


class AbiMismatchError(BindingsAbiError):
    """Commit or struct/enum layouts differ between the libraries and the bindings."""

    def __init__(self, message: str, problems: list[str]) -> None:
        super().__init__(message)
        self.problems = problems


class MissingSymbolError(BindingsAbiError):
    """Functions the bindings declare are not exported by the libraries."""

    def __init__(self, message: str, missing: list[str]) -> None:
        super().__init__(message)
        self.missing = missing


class ForeignLibraryError(BindingsAbiError):
    """A library file is not the one its build recorded (swapped in from another build), or
    there is no build record to check it against. ``library`` names the file."""

    def __init__(self, message: str, library: Path) -> None:
        super().__init__(message)
        self.library = library


def _sha256(path: Path) -> str:
    import hashlib  # only when a file is hashed: OpenSSL's module costs milliseconds to import

    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()  # one reused buffer: twice as fast


def find_build_info(folder: Path) -> Path | None:
    for candidate in (folder / BUILD_INFO, folder.parent / BUILD_INFO):
        if candidate.is_file():
            return candidate
    return None


def check_build_files(folder: Path, paths: list[Path]) -> str | None:
    """Raise :class:`ForeignLibraryError` unless every file in ``paths`` (links resolved) is a
    library the build record beside ``folder`` lists, with its recorded sha256. Returns the
    seal (:func:`verified_files.seal`) of the checked files, None when they cannot be sealed."""
    if os.environ.get(SKIP_ABI_CHECK_ENV) == "1":
        return None
    info_path = find_build_info(folder)
    if info_path is None:
        raise ForeignLibraryError(
            f"no {BUILD_INFO} in {folder} or {folder.parent}, so nothing ties these libraries "
            "to the build the ABI check describes: use the lib/ folder of a `llama-bindgen "
            f"build` or of a release with its {BUILD_INFO} beside it, or skip the checks with "
            f"load(check_abi=False) / {SKIP_ABI_CHECK_ENV}=1",
            folder / BUILD_INFO,
        )
    reals = [path.resolve() for path in paths]
    sealed = verified_files.seal(info_path, reals)  # identities taken before anything is hashed
    if verified_files.is_sealed(sealed):
        return sealed
    import json  # only when the record is read: a sealed load needs no JSON

    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
        recorded = {
            (info_path.parent / rel).resolve(): str(digest)
            for rel, digest in info["libraries"].items()
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ForeignLibraryError(
            f"{info_path} cannot be read as a build record ({exc})", info_path
        ) from None
    for path, real in zip(paths, reals, strict=True):
        expected = recorded.get(real)
        if expected is None:
            raise ForeignLibraryError(
                f"{path} is not one of the libraries {info_path} records: it comes from "
                "another build; put the whole build's lib/ folder in place, not single files",
                path,
            )
        actual = _sha256(real)
        if actual != expected:
            raise ForeignLibraryError(
                f"{path} has sha256 {actual}, but {info_path} records {expected} for it: it "
                "comes from another build; put the whole build's lib/ folder in place, not "
                "single files",
                path,
            )
    verified_files.record(sealed)
    return sealed


def manifest() -> dict[str, Any]:
    import json

    text = Path(__file__).with_name("abi_manifest.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def runtime_platform() -> tuple[str, str]:
    """This process's platform as ``RUNTIME_TARGETS`` keys it: ``sys.platform`` (``android``
    wherever ``sys.getandroidapilevel`` exists, as before CPython 3.13 said ``linux`` there) and
    the machine in lower case."""
    if hasattr(os, "uname"):
        machine = os.uname().machine.lower()
    else:  # Windows; ``platform`` costs milliseconds to import, so only here
        import platform

        machine = platform.machine().lower()
    return ("android" if hasattr(sys, "getandroidapilevel") else sys.platform), machine


def runtime_targets() -> list[str]:
    """IR target triples that describe this process's platform, best first (none for a
    platform the registry does not know)."""
    return list(RUNTIME_TARGETS.get(runtime_platform(), ()))


def _describe(key: str, found: int | None, expected: int | None) -> str:
    kind, _, rest = key.partition(" ")
    what = {
        "size": f"sizeof({rest})",
        "align": f"alignof({rest})",
        "enum": f"sizeof(enum {rest})",
    }.get(kind, f"offsetof({rest.replace(' ', ', ', 1)})")
    return f"{what}: library {found if found is not None else 'absent'}, " + (
        f"bindings {expected if expected is not None else 'absent'}"
    )


def library_layout(abi: Any, ffi: Any) -> dict[str, int]:
    count = int(abi.llama_bindgen_abi_layout_count())
    return {
        ffi.string(abi.llama_bindgen_abi_layout_key(i)).decode(): int(
            abi.llama_bindgen_abi_layout_value(i)
        )
        for i in range(count)
    }


def check_libraries(
    folder: Path,
    find_library: Callable[[Path, str], Path | None],
    exporters: Mapping[str, Any],
    sealed: str | None = None,
) -> None:
    """Raise :class:`AbiMismatchError` or :class:`MissingSymbolError` unless the libraries in
    ``folder`` are the ones these bindings describe. ``exporters`` maps a manifest library name
    (``llama``, ``ggml``, ``llama_mtp``, ``mtmd``, ``ggml_rpc``) to the opened library
    (``llama_mtp``, ``mtmd`` and ``ggml_rpc`` may be missing).
    The identity library is read through the bindings' ``ffi``, which declares its functions
    (``_ffi.ABI_GUARD_CDEF``), so the guard parses no C. ``sealed``: the seal
    :func:`check_build_files` returned for these files; the comparison is a function of their
    contents and of these bindings (``GUARD_IDENTITY``), so a set that passed it once is not
    compared again until a file or the bindings change."""
    if os.environ.get(SKIP_ABI_CHECK_ENV) == "1":
        return
    line = None if sealed is None else f"{sealed}\tguard {GUARD_IDENTITY}"
    if verified_files.is_sealed(line):
        return
    _compare(folder, find_library, exporters)
    verified_files.record(line)


def _compare(
    folder: Path,
    find_library: Callable[[Path, str], Path | None],
    exporters: Mapping[str, Any],
) -> None:
    from . import _abi_expected  # only when compared: a sealed load does not read the tables

    release = _abi_expected.TAG or _abi_expected.COMMIT
    abi_path = find_library(folder, ABI_STEM)
    if abi_path is None:
        raise AbiMismatchError(
            f"{folder} has no {ABI_STEM} library, so its ABI cannot be checked: use libraries "
            f"built by `llama-bindgen build` for llama.cpp {release}, or "
            f"skip the check with load(check_abi=False) / {SKIP_ABI_CHECK_ENV}=1",
            ["ABI identity library missing"],
        )
    abi = ffi.dlopen(str(abi_path))
    problems: list[str] = []
    commit = ffi.string(abi.llama_bindgen_abi_commit()).decode()
    if commit != _abi_expected.COMMIT:
        problems.append(
            f"llama.cpp commit: libraries built from {commit}, bindings generated for "
            f"{_abi_expected.COMMIT} ({_abi_expected.TAG or 'untagged'})"
        )
    targets = [t for t in runtime_targets() if t in _abi_expected.LAYOUTS]
    if not targets:
        here = ", ".join(runtime_targets()) or " ".join(runtime_platform())
        problems.append(
            f"no layout in the bindings for this platform ({here}); generate with --target for it"
        )
    else:
        expected = _abi_expected.LAYOUTS[targets[0]]
        found = library_layout(abi, ffi)
        # sizes first, then fields in the order the library lays them out
        rank = {"size": 0, "align": 1, "enum": 2}
        keys = [*found, *(k for k in expected if k not in found)]
        keys.sort(key=lambda k: rank.get(k.split(" ")[0], 3))
        by_type: dict[str, list[str]] = {}
        for key in keys:
            if expected.get(key) != found.get(key):
                type_name = key.split(" ")[1]
                by_type.setdefault(type_name, []).append(
                    _describe(key, found.get(key), expected.get(key))
                )
        for type_name, details in sorted(by_type.items()):
            more = f"; ... {len(details) - 3} more" if len(details) > 3 else ""
            problems.append(f"{type_name}: " + "; ".join(details[:3]) + more)
    if problems:
        shown = "\n  ".join(problems)
        raise AbiMismatchError(
            f"the libraries in {folder} do not match these bindings "
            f"(llama.cpp {release}):\n  {shown}",
            problems,
        )
    missing = sorted(
        name
        for library in STRICT_LIBRARIES
        if library in exporters
        for name in _abi_expected.FUNCTIONS.get(library, ())
        if not _exports(exporters[library], name)
    )
    if missing:
        shown = ", ".join(missing[:_SHOWN]) + (" ..." if len(missing) > _SHOWN else "")
        raise MissingSymbolError(
            f"{len(missing)} functions the bindings declare are not exported by the libraries "
            f"in {folder}: {shown}",
            missing,
        )


def _exports(library: Any, name: str) -> bool:
    try:
        getattr(library, name)
    except SYMBOL_ERRORS:
        return False
    return True
