"""The compiled cffi API-mode module (``_llama_bindings_api``) beside a build's libraries.

ABI mode resolves every call at run time through libffi; a compiled module calls each function
through generated C, which costs a third to two thirds as much per call (``bench/``). The module is
built from the same declarations as the generated bindings: cffi writes its C source from the
cdef, the build's C compiler compiles it against the installed headers (which also checks every
struct layout the cdef spells out) and links it to the built libraries with ``$ORIGIN`` as its
run path. It exports ``llama_bindgen_api_identity()``, the sha256 of those declarations, which the
generated loader compares with its own before it uses the module.

Only functions some built library exports are compiled in (ggml's headers declare a few that no
build defines). It is a stable-ABI (``abi3``) extension, so one file serves every CPython 3
version from the one it was built with. Built where the build's compiler makes extensions for the
running Python: the host platform. Cross builds leave it out and say so in ``build-info.json``
(the loader then uses ABI mode).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator.emit import API_MODULE
from generator.emit.cdef import build_cdef, cdef_identity, declarations_text
from generator.ir import Interface
from generator.native.cmake_driver import BuildError, ccache_path, run_step
from generator.platforms import Platform, Toolchain
from generator.symbols import exported_functions_of

IDENTITY_FUNCTION = "llama_bindgen_api_identity"
ABI3_SUFFIX = ".abi3.so"


@dataclass(frozen=True)
class ApiModuleSource:
    """What the module is compiled from: C source and the declarations' identity."""

    c_source: str
    identity: str
    left_out: tuple[str, ...]  # declared functions no built library exports


def why_not_built(plat: Platform, toolchain: Toolchain) -> str | None:
    """``None`` when this build can make the module, else the reason it cannot."""
    if toolchain.cross:
        return (
            f"{plat.name} is a cross build: compiling a CPython extension needs that platform's "
            "Python headers; the bindings use cffi's ABI mode there"
        )
    if plat.binary_format != "elf":
        return (
            f"the API-mode module is built for Linux so far, not {plat.name}; the bindings use "
            "cffi's ABI mode there"
        )
    if ABI3_SUFFIX not in importlib.machinery.EXTENSION_SUFFIXES:
        return f"this Python does not load {ABI3_SUFFIX} extensions"
    if not (python_include() / "Python.h").is_file():
        return f"Python.h not found in {python_include()} (install the Python development headers)"
    return None


def python_include() -> Path:
    return Path(sysconfig.get_paths()["include"])


def module_file_name() -> str:
    return f"{API_MODULE}{ABI3_SUFFIX}"


def api_module_source(api: Interface, exported: set[str]) -> ApiModuleSource:
    """cffi's C source for ``api``'s declarations, limited to the ``exported`` functions."""
    import cffi

    cdef = build_cdef(api)
    identity = cdef_identity(cdef)
    kept = [
        line
        for line, function in zip(cdef.functions, cdef.bound_functions, strict=True)
        if function.name in exported
    ]
    left_out = tuple(f.name for f in cdef.bound_functions if f.name not in exported)
    declarations = declarations_text(cdef, kept) + f"const char *{IDENTITY_FUNCTION}(void);\n"
    headers = ("llama.h", *sorted(h for h in api.headers if h != "llama.h"))
    prelude = "".join(f'#include "{h}"\n' for h in headers)
    prelude += f'static const char *{IDENTITY_FUNCTION}(void) {{ return "{identity}"; }}\n'
    ffi = cffi.FFI()
    ffi.cdef(declarations)
    ffi.set_source(API_MODULE, prelude)
    # cffi writes the C source to a file only; a temporary one keeps this function pure
    with tempfile.TemporaryDirectory(prefix="llama-bindgen-api-") as tmp:
        path = Path(tmp) / f"{API_MODULE}.c"
        ffi.emit_c_code(str(path))
        c_source = path.read_text(encoding="utf-8")
    return ApiModuleSource(c_source, identity, left_out)


def source_sha256(api: Interface) -> str:
    """What decides whether a built module is current: the declarations and cffi's version."""
    import cffi

    text = cdef_identity(build_cdef(api)) + cffi.__version__
    return hashlib.sha256(text.encode()).hexdigest()


def build_api_module(
    api: Interface,
    plat: Platform,
    compiler: str,
    platform_dir: Path,
    work: Path,
    env: dict[str, str],
    libraries: list[str],
    label: str = "",
) -> dict[str, Any]:
    """Compile the module into ``platform_dir/lib``, linked to ``libraries`` (stems, all built);
    returns its build-info record. ``label`` names the build in progress lines (default
    ``build <platform>``)."""
    lib_dir = platform_dir / "lib"
    exported = exported_functions_of(
        [(lib_dir / plat.library_file(stem)).resolve() for stem in libraries]
    )
    source = api_module_source(api, exported)
    work.mkdir(parents=True, exist_ok=True)
    c_path = work / f"{API_MODULE}.c"
    c_path.write_text(source.c_source, encoding="utf-8")
    out = lib_dir / module_file_name()
    launcher = ccache_path()
    argv = [
        *([launcher] if launcher else []),
        compiler,
        "-shared",
        "-fPIC",
        "-O2",
        "-w",
        f"-I{python_include()}",
        f"-I{platform_dir / 'include'}",
        str(c_path),
        "-o",
        str(out),
        f"-L{lib_dir}",
        *(f"-l{name}" for name in libraries),
        "-Wl,-rpath,$ORIGIN",
    ]
    step = f"{label or f'build {plat.name}'}: API-mode module"
    run_step(step, argv, work / "compile.log", env)
    if not out.is_file():
        raise BuildError(step, work / "compile.log", "no output")
    return {
        "status": "built",
        "file": f"lib/{out.name}",
        "identity": source.identity,
        "functions_left_out": list(source.left_out),
    }
