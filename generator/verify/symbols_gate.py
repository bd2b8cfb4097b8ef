"""The symbols gate: every function llama.h, the MTP wrapper, libmtmd's headers and ggml-rpc.h
declare is exported by a build."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from generator.native.build import BuildResult
from generator.sources import rpc_api
from generator.symbols import exported_functions_of

# Held to every declared function: the libraries the bindings' load-time guard holds to them
# (libmtmd and libggml-rpc are built wherever the bindings carry them); ggml's headers declare
# functions that no build defines (ggml_threadpool_get_n_threads in b11312), so ggml's absences
# are reported. (the shipped abi_guard's STRICT_LIBRARIES; that module needs generated values to
# import).
STRICT_LIBRARIES = ("llama", "llama_mtp", "mtmd", rpc_api.LIBRARY)
# a library whose file's stem is not its name
FILE_STEMS = {rpc_api.LIBRARY: rpc_api.STEM}


@dataclass(frozen=True)
class SymbolReport:
    missing: tuple[str, ...]  # "library: function" for the strict libraries
    ggml_missing: tuple[str, ...]  # declared by the ggml headers, exported by no ggml library
    checked: int

    @property
    def passed(self) -> bool:
        return not self.missing


def library_files(build: BuildResult, library: str) -> list[Path]:
    """The built files that together provide ``library`` (ggml is split into several)."""
    lib = build.lib_dir
    if library == "ggml":
        names = ("ggml", "libggml")
        return sorted(p for p in lib.iterdir() if p.name.startswith(names) and not p.is_symlink())
    return [lib / build.platform.library_file(FILE_STEMS.get(library, library))]


def missing_functions(build: BuildResult, expected: dict[str, set[str]]) -> list[str]:
    """``library: name`` for every expected function its library files do not export."""
    missing: list[str] = []
    for library, names in sorted(expected.items()):
        files = library_files(build, library)
        absent = [str(f) for f in files if not f.is_file()]
        if absent or not files:
            missing += [f"{library}: {name} (library file missing)" for name in sorted(names)]
            continue
        exported = exported_functions_of(files)
        missing += [f"{library}: {name}" for name in sorted(names - exported)]
    return missing


def check_symbols(manifest_path: Path, build: BuildResult) -> SymbolReport:
    data = json.loads(manifest_path.read_text(encoding="utf-8"))
    wanted: dict[str, set[str]] = {}
    for fn in data["functions"]:
        if fn.get("bound", True) and (fn["library"] != "llama_mtp" or build.mtp.supported):
            wanted.setdefault(fn["library"], set()).add(fn["name"])
    strict = {lib: names for lib, names in wanted.items() if lib in STRICT_LIBRARIES}
    others = {lib: names for lib, names in wanted.items() if lib not in STRICT_LIBRARIES}
    checked = sum(len(names) for names in wanted.values())
    return SymbolReport(
        tuple(missing_functions(build, strict)), tuple(missing_functions(build, others)), checked
    )
