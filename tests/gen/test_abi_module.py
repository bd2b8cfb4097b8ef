"""cffi's out-of-line ABI module (``_ffi_abi.py``): the same bytes from every generation, what
importing the bindings uses (so nothing parses C at import), the same layouts as an in-line
parse, and the in-line fallback, with its reason, where the module cannot be imported. Each
import runs in its own process, so that what it loads is its own."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import cffi
import pytest

from generator.emit import PACKAGE_NAME
from generator.emit.abi_module import (
    ABI_GUARD_CDEF,
    ABI_MODULE_FILE,
    CACHE_FOLDER,
    abi_module_source,
)
from generator.paths import CACHE_ENV
from tests.bindings_process import run_json
from tests.repo import REPO_ROOT

PACKAGE = REPO_ROOT / "generated" / PACKAGE_NAME
MODULE_NAME = f"{PACKAGE_NAME}._ffi_abi"

EMIT = """
import sys
from pathlib import Path
from generator.emit.abi_module import abi_module_source
sys.stdout.write(abi_module_source(sys.argv[1], Path(sys.argv[2]).read_text()))
"""

# What importing the bindings loaded, and every layout the ABI manifest records for this machine
# as the imported ffi computes it.
IMPORT = """
import json, sys, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import llama_bindings as lb
from llama_bindings import _ffi, abi_guard
manifest = abi_guard.manifest()
target = next(t for t in abi_guard.runtime_targets() if t in manifest["targets"])
layouts = {}
for name, record in manifest["targets"][target]["structs"].items():
    for c_name in (f"{record['kind']} {name}", name):
        try:
            size = lb.ffi.sizeof(c_name)
            break
        except Exception:  # opaque in the cdef, or not a typedef name
            continue
    else:
        continue
    layouts[name] = [size, lb.ffi.alignof(c_name)] + [
        lb.ffi.offsetof(c_name, f["name"]) for f in record["fields"] if "bit_width" not in f
    ]
preparsed = sys.modules.get("llama_bindings._ffi_abi")
print(json.dumps({
    "source": _ffi.FFI_SOURCE,
    "ffi_is_the_modules": preparsed is not None and lb.ffi is preparsed.ffi,
    "parser_loaded": sorted(m for m in ("pycparser", "cffi.cparser") if m in sys.modules),
    "warnings": [f"{w.category.__name__}: {w.message}" for w in caught],
    "layouts": layouts,
}))
"""

BLOCK_MODULE = f"import sys\nsys.modules[{MODULE_NAME!r}] = None\n"


def _import(package_parent: Path, before: str = "") -> dict[str, object]:
    return run_json(before + IMPORT, package_parent)


def test_emitted_module_is_the_same_bytes_in_every_process(tmp_path: Path) -> None:
    """Two generations, in processes with other hash seeds, working folders and caches, write
    the same module, and it names no path of the machine that wrote it."""
    declarations = tmp_path / "cdef.h"
    declarations.write_text((PACKAGE / "cdef.h").read_text(encoding="utf-8"), encoding="utf-8")
    emitted = []
    for seed in ("0", "12345"):
        cwd = tmp_path / f"run{seed}"
        cwd.mkdir()
        code = EMIT + f"#{cwd}\n"
        proc = subprocess.run(
            [sys.executable, "-c", code, MODULE_NAME, str(declarations)],
            cwd=cwd,
            env={
                **os.environ,
                "PYTHONPATH": str(REPO_ROOT),
                "PYTHONHASHSEED": seed,
                CACHE_ENV: str(cwd / "cache"),  # each emits, none reads the other's output
            },
            capture_output=True,
            check=True,
        )
        emitted.append(proc.stdout)
    assert emitted[0] == emitted[1]
    assert str(tmp_path).encode() not in emitted[0]
    # the committed module holds exactly that text below its header
    assert emitted[0].decode().rstrip("\n") in (PACKAGE / ABI_MODULE_FILE).read_text("utf-8")


def test_emission_is_kept_in_the_cache_by_its_inputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second emission of the same declarations is read from the cache (cffi is not asked
    again); other declarations are not; a cache that cannot be written costs only the parse."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    first = abi_module_source(MODULE_NAME, "int f(void);")
    assert len(list((tmp_path / "cache" / CACHE_FOLDER).glob("*.py"))) == 1

    def refuse(*args: object) -> None:
        raise AssertionError("cffi was asked again")

    with monkeypatch.context() as patched:
        patched.setattr(cffi, "FFI", refuse)
        assert abi_module_source(MODULE_NAME, "int f(void);") == first
        with pytest.raises(AssertionError, match="asked again"):
            abi_module_source(MODULE_NAME, "int g(void);")
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(CACHE_ENV, str(blocker))
    assert abi_module_source(MODULE_NAME, "int f(void);") == first


def test_module_declares_the_guard_functions_and_only_needs_the_backend() -> None:
    text = abi_module_source(MODULE_NAME, "int f(void);")
    namespace: dict[str, object] = {}
    exec(compile(text, ABI_MODULE_FILE, "exec"), namespace)
    assert type(namespace["ffi"]).__module__ == "_cffi_backend"
    imports = [line for line in text.splitlines() if line.startswith(("import ", "from "))]
    assert imports == ["import _cffi_backend"]
    for line in ABI_GUARD_CDEF.splitlines():
        name = line.split("(")[0].split()[-1].lstrip("*")
        assert name in text, name


def test_import_uses_the_preparsed_ffi_and_parses_no_c() -> None:
    out = _import(PACKAGE.parent)
    assert out["source"] == "pre-parsed"
    assert out["ffi_is_the_modules"] is True
    assert out["parser_loaded"] == []
    assert out["warnings"] == []
    assert out["layouts"], "no struct layout compared"


def test_preparsed_layouts_equal_an_inline_parse() -> None:
    preparsed = _import(PACKAGE.parent)
    inline = _import(PACKAGE.parent, BLOCK_MODULE)
    assert inline["source"] != "pre-parsed"
    assert preparsed["layouts"] == inline["layouts"]


def test_blocked_module_falls_back_to_an_inline_parse_with_its_reason() -> None:
    out = _import(PACKAGE.parent, BLOCK_MODULE)
    source = str(out["source"])
    assert source.startswith(f"in-line: {MODULE_NAME} cannot be imported")
    assert out["parser_loaded"] == ["cffi.cparser", "pycparser"]
    caught = out["warnings"]
    assert isinstance(caught, list) and len(caught) == 1
    assert str(caught[0]).startswith("RuntimeWarning: ") and "in-line" in str(caught[0])


@pytest.mark.parametrize("version", ["0x9999", "0x2500"])
def test_module_of_a_format_this_cffi_does_not_load_falls_back(
    tmp_path: Path, version: str
) -> None:
    """A cffi whose backend does not know the module's format (a newer or older one) raises
    ImportError on import: the bindings still import, parsing in-line, and say why."""
    package = tmp_path / PACKAGE_NAME
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__", "lib"))
    module = package / ABI_MODULE_FILE
    text = module.read_text(encoding="utf-8")
    line = re.compile(r"^    _version = 0x[0-9A-Fa-f]+,$", re.MULTILINE)
    changed = line.sub(f"    _version = {version},", text)
    assert changed != text
    module.write_text(changed, encoding="utf-8")
    out = _import(tmp_path)
    assert "unknown version" in str(out["source"]), out["source"]
    assert out["layouts"] == _import(PACKAGE.parent)["layouts"]
