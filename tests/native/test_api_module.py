"""The compiled cffi API-mode module: built beside the host build's libraries, chosen by the
generated loader when it matches the bindings, refused (or left for ABI mode) when it does not.
Each load runs in its own process so that a crash shows as a crash."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from generator.hashing import file_sha256
from generator.native.api_module import module_file_name
from tests.bindings_process import run_json
from tests.conftest import BuildFactory
from tests.repo import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]
PACKAGE = REPO_ROOT / "generated" / "llama_bindings"

# Both modes in one process, on the same libraries: every field of the struct returned by value
# and a call taking a struct pointer must agree.
COMPARE_MODES = """
import json, sys, warnings
warnings.simplefilter("error")
import llama_bindings as lb
api = lb.load(sys.argv[1])
abi = lb.load(sys.argv[1], mode="abi")

out = {"modes": [api.mode, abi.mode]}
for name in ("llama_context_default_params", "llama_model_default_params",
             "llama_sampler_chain_default_params"):
    a = getattr(api.llama, name)()
    b = getattr(abi.llama, name)()
    out[name] = [
        {f: str(getattr(a, f)) for f, t in api.ffi.typeof(a).fields if t.type.kind == "primitive"},
        {f: str(getattr(b, f)) for f, t in abi.ffi.typeof(b).fields if t.type.kind == "primitive"},
    ]
out["max_devices"] = [int(api.llama.llama_max_devices()), int(abi.llama.llama_max_devices())]
out["mtp"] = [api.llama_mtp is not None, abi.llama_mtp is not None]
print(json.dumps(out))
"""

LOAD = """
import json, sys, warnings
import llama_bindings as lb
mode = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] != "-" else None
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        libs = lb.load(sys.argv[1], mode=mode)
    except (lb.loader.ApiModuleError, ValueError) as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
        raise SystemExit(0)
print(json.dumps({"error": None, "mode": libs.mode,
                  "warnings": [str(w.message) for w in caught],
                  "n_ctx": int(libs.llama.llama_context_default_params().n_ctx)}))
"""


_run = run_json

# load() and one call, then what the process imported: with the pre-parsed declarations nothing
# parses C (pycparser is what ffi.cdef uses), in either mode.
LOAD_PARSES_NOTHING = """
import json, sys
block = sys.argv[3] == "in-line"
if block:  # as a cffi whose backend cannot load the pre-parsed module would have it
    import warnings
    warnings.simplefilter("ignore", RuntimeWarning)
    sys.modules["llama_bindings._ffi_abi"] = None
import llama_bindings as lb
libs = lb.load(sys.argv[1], mode=sys.argv[2])
print(json.dumps({
    "mode": libs.mode,
    "ffi_source": lb._ffi.FFI_SOURCE.split(":")[0],
    "ffi_is_the_bindings": libs.ffi is lb.ffi,
    "ffi_module": type(libs.ffi).__module__,
    "max_devices": int(libs.llama.llama_max_devices()),
    "n_ctx": int(libs.llama.llama_context_default_params().n_ctx),
    "parser_loaded": sorted(m for m in ("pycparser", "cffi.cparser") if m in sys.modules),
}))
"""


@pytest.fixture(scope="module")
def host_lib_dir(native_build: BuildFactory, tree_pin: Path) -> Path:
    return native_build(tree_pin, "linux-x86_64").lib_dir


def test_host_build_compiles_the_module_from_the_bindings_declarations(
    native_build: BuildFactory, tree_pin: Path
) -> None:
    build = native_build(tree_pin, "linux-x86_64")
    record = build.info["api_module"]
    assert record["status"] == "built", record
    module = build.platform_dir / record["file"]
    assert module.name == module_file_name()
    assert build.info["libraries"][record["file"]] == file_sha256(module)
    ffi_text = (PACKAGE / "_ffi.py").read_text()
    assert f'CDEF_IDENTITY = "{record["identity"]}"' in ffi_text
    # declared by ggml.h, defined by no build: left out of the module, named in build-info
    assert "ggml_threadpool_get_n_threads" in record["functions_left_out"]


def test_cross_build_says_why_it_has_no_module(native_build: BuildFactory, tree_pin: Path) -> None:
    build = native_build(tree_pin, "linux-aarch64")
    record = build.info["api_module"]
    assert record["status"] == "not built"
    assert "cross build" in record["reason"]
    assert not (build.lib_dir / module_file_name()).exists()


def test_loader_prefers_the_module_and_both_modes_agree(host_lib_dir: Path) -> None:
    out = _run(COMPARE_MODES, PACKAGE.parent, str(host_lib_dir))
    assert out["modes"] == ["api", "abi"]
    assert out["mtp"] == [True, True]
    for name in (
        "llama_context_default_params",
        "llama_model_default_params",
        "llama_sampler_chain_default_params",
    ):
        api_fields, abi_fields = out[name]  # type: ignore[misc]
        assert api_fields, name
        assert api_fields == abi_fields, name
    max_devices = out["max_devices"]
    assert isinstance(max_devices, list) and max_devices[0] == max_devices[1] > 0


def test_mode_from_the_environment_and_bad_modes(host_lib_dir: Path) -> None:
    abi = _run(LOAD, PACKAGE.parent, str(host_lib_dir), "-", LLAMA_BINDGEN_CFFI_MODE="abi")
    assert abi["mode"] == "abi"
    bad = _run(LOAD, PACKAGE.parent, str(host_lib_dir), "fast")
    assert bad["error"] == "ValueError"


def test_missing_module_falls_back_or_is_refused(host_lib_dir: Path, tmp_path: Path) -> None:
    libs = tmp_path / "lib"
    shutil.copytree(host_lib_dir, libs, symlinks=True)
    shutil.copy2(host_lib_dir.parent / "build-info.json", tmp_path / "build-info.json")
    (libs / module_file_name()).unlink()
    auto = _run(LOAD, PACKAGE.parent, str(libs))
    assert auto["mode"] == "abi" and auto["warnings"] == []
    required = _run(LOAD, PACKAGE.parent, str(libs), "api")
    assert required["error"] == "ApiModuleError"
    assert module_file_name().split(".")[0] in str(required["message"])


def test_module_from_other_declarations_is_not_used(host_lib_dir: Path, tmp_path: Path) -> None:
    """Bindings whose declarations differ from the module's: ABI mode with a warning, or an
    error when API mode is required."""
    package = tmp_path / "llama_bindings"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    ffi_py = package / "_ffi.py"
    text = ffi_py.read_text()
    start = text.index('CDEF_IDENTITY = "') + len('CDEF_IDENTITY = "')
    ffi_py.write_text(text[:start] + "0" * 64 + text[start + 64 :])
    auto = _run(LOAD, tmp_path, str(host_lib_dir))
    assert auto["mode"] == "abi"
    assert any("other declarations" in str(w) for w in auto["warnings"])  # type: ignore[attr-defined]
    required = _run(LOAD, tmp_path, str(host_lib_dir), "api")
    assert required["error"] == "ApiModuleError"


@pytest.mark.parametrize("mode", ["abi", "api"])
def test_load_with_the_preparsed_declarations_parses_no_c(host_lib_dir: Path, mode: str) -> None:
    """ABI mode calls through the pre-parsed ffi, API mode through the compiled module's; either
    way the libraries were opened and the ABI guard passed without pycparser being imported."""
    out = _run(LOAD_PARSES_NOTHING, PACKAGE.parent, str(host_lib_dir), mode, "pre-parsed")
    assert out["mode"] == mode
    assert out["ffi_source"] == "pre-parsed"
    assert out["ffi_is_the_bindings"] is (mode == "abi")
    assert out["parser_loaded"] == []
    assert isinstance(out["max_devices"], int) and out["max_devices"] > 0


def test_inline_fallback_opens_checks_and_calls_the_same(host_lib_dir: Path) -> None:
    """Where the pre-parsed module cannot be used, the in-line parse declares the guard's
    functions too: load() with its checks passes and calls agree with the pre-parsed ffi."""
    inline = _run(LOAD_PARSES_NOTHING, PACKAGE.parent, str(host_lib_dir), "abi", "in-line")
    preparsed = _run(LOAD_PARSES_NOTHING, PACKAGE.parent, str(host_lib_dir), "abi", "pre-parsed")
    assert inline["ffi_source"] == "in-line"
    assert inline["ffi_module"] == "cffi.api" and preparsed["ffi_module"] == "_cffi_backend"
    assert inline["parser_loaded"] == ["cffi.cparser", "pycparser"]
    assert (inline["max_devices"], inline["n_ctx"]) == (
        preparsed["max_devices"],
        preparsed["n_ctx"],
    )
