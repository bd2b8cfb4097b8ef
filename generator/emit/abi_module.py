"""cffi's out-of-line ABI module of the bindings' declarations: ``_ffi_abi.py``.

``ffi.cdef`` parses C with pycparser, which for llama.h and ggml.h costs about half a second at
every import. cffi's out-of-line ABI mode (``set_source(name, None)``) does that parse once, here,
and writes a pure-Python module holding the parsed declarations as cffi's type tables; importing
it needs only ``_cffi_backend`` (no compiler, no pycparser) and takes milliseconds. Layouts are
not in the tables: the backend lays out structs when the module is imported, for the machine it
runs on, as ``ffi.cdef`` would.

The module holds the cdef's declarations and those of the ABI identity library the load-time
guard reads (``ABI_GUARD_CDEF``), so neither is parsed at import. Its text depends on the
declarations and the recompiler of the cffi that emits it; it records the module format in
``_version`` (0x2601, or 0x2801 with char16_t/char32_t), which the backend of every cffi this
project supports (>= 1.16) loads. A backend that does not raises ``ImportError``; the generated
``_ffi.py`` then parses ``cdef.h`` in-line and warns.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import re
import tempfile
from pathlib import Path
from typing import Any

from generator.paths import cached_text

ABI_MODULE_FILE = "_ffi_abi.py"
# What generated/llama_bindings/abi_guard.py reads from the ABI identity library that
# ``llama-bindgen build`` compiles (templates/probe/abi_identity.c.j2 defines them).
ABI_GUARD_CDEF = """\
const char *llama_bindgen_abi_commit(void);
const char *llama_bindgen_abi_digest(void);
size_t llama_bindgen_abi_layout_count(void);
const char *llama_bindgen_abi_layout_key(size_t i);
unsigned long long llama_bindgen_abi_layout_value(size_t i);
"""
# The first cffi whose backend loads each module format (0x2801 adds char16_t and char32_t).
FORMAT_SINCE = {0x2601: "1.0", 0x2801: "1.11"}


CACHE_FOLDER = "cffi-abi-modules"


def abi_module_source(module_name: str, declarations: str) -> str:
    """The out-of-line ABI module cffi emits for ``declarations`` plus ``ABI_GUARD_CDEF``:
    pure Python, a function of its inputs (cffi sorts its tables by name) and of cffi's version.

    cffi's parse costs about as much as the rest of a one-target ``generate``, so its output is
    kept in the cache folder (``CACHE_FOLDER``) under the sha256 of those inputs, as the compiled
    templates are; a cache that cannot be read or written only costs the parse."""
    # the backend's version is cffi's (cffi refuses a mismatch); importing cffi costs more
    backend: Any = importlib.import_module("_cffi_backend")
    inputs = "\0".join((module_name, str(backend.__version__), declarations, ABI_GUARD_CDEF))
    return cached_text(CACHE_FOLDER, inputs, lambda: _emit(module_name, declarations), ".py")


def _emit(module_name: str, declarations: str) -> str:
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(declarations)
    ffi.cdef(ABI_GUARD_CDEF)
    ffi.set_source(module_name, None)
    # cffi writes the module to a file only (and says so on stdout)
    with (
        tempfile.TemporaryDirectory(prefix="llama-bindgen-abi-") as tmp,
        contextlib.redirect_stdout(io.StringIO()),
    ):
        path = Path(tmp) / ABI_MODULE_FILE
        ffi.emit_python_code(str(path))
        return path.read_text(encoding="utf-8")


def abi_module_context(module_name: str, declarations: str) -> dict[str, Any]:
    """What ``templates/bindings/_ffi_abi.py.j2`` renders: the module and its format."""
    source = abi_module_source(module_name, declarations)
    found = re.search(r"^    _version = (0x[0-9a-fA-F]+),$", source, re.MULTILINE)
    if found is None:
        raise ValueError("cffi's out-of-line module has no _version line")
    version = int(found.group(1), 16)
    return {
        "abi_module_source": source.rstrip("\n"),
        "abi_module_format": f"0x{version:04x}",
        "abi_module_min_cffi": FORMAT_SINCE.get(version, "(a format this generator does not know)"),
    }
