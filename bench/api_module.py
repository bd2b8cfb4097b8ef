"""Compile a cffi API-mode (out-of-line, compiled) module from the emitted cdef, in the cache.

The generated package uses ABI mode (no compiler needed downstream); this module only measures
what API mode would buy for the same calls.
"""

from __future__ import annotations

import ctypes
import hashlib
import re
from pathlib import Path

MODULE_NAME = "_llama_bench_api"
LIBRARIES = ("llama", "llama_mtp", "ggml", "ggml-base", "ggml-cpu")


def _exported(lib_dir: Path) -> list[ctypes.CDLL]:
    return [ctypes.CDLL(str(lib_dir / f"lib{name}.so")) for name in LIBRARIES]


def api_cdef(cdef_text: str, lib_dir: Path) -> str:
    """The emitted ABI-mode cdef without comment lines and without the functions no library
    defines (headers declare a few; API mode links every declared function)."""
    import cffi

    text = re.sub(r"^\s*//.*$", "", cdef_text, flags=re.MULTILINE)
    probe = cffi.FFI()
    probe.cdef(text)
    libs = _exported(lib_dir)
    declared = [
        key.split(" ", 1)[1]
        for key in probe._parser._declarations  # cffi has no public listing
        if key.startswith("function ")
    ]
    for name in declared:
        if not any(hasattr(lib, name) for lib in libs):
            text = re.sub(rf"[^;{{}}]*\b{name}\s*\([^;]*;", "\n", text)
    return text


def build(cdef_path: Path, include_dir: Path, lib_dir: Path, cache: Path) -> Path:
    """Build (or reuse) the module; returns the folder to put on sys.path."""
    import cffi

    cdef = api_cdef(cdef_path.read_text(), lib_dir)
    key = hashlib.sha256(
        "\0".join([cdef, str(include_dir), str(lib_dir), cffi.__version__]).encode()
    ).hexdigest()[:16]
    out = cache / "bench-api" / key
    if any(out.glob(f"{MODULE_NAME}*.so")):
        return out
    out.mkdir(parents=True, exist_ok=True)
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    ffi.set_source(
        MODULE_NAME,
        '#include "llama.h"\n#include "llama_mtp.h"\n',
        include_dirs=[str(include_dir)],
        library_dirs=[str(lib_dir)],
        libraries=list(LIBRARIES),
        extra_compile_args=["-O2", "-w"],
        extra_link_args=[f"-Wl,-rpath,{lib_dir}"],
    )
    ffi.compile(tmpdir=str(out), verbose=False)
    return out
