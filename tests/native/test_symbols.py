"""Every function the bindings declare is exported by the built libraries, on every platform."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from generator.native.build import BuildResult
from generator.native.host import host_toolchain
from generator.symbols import exported_functions, machine
from generator.verify.symbols_gate import missing_functions
from tests.conftest import BuildFactory
from tests.native.expected_symbols import expected_functions

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

PLATFORMS = ["linux-x86_64", "linux-aarch64", "windows-x86_64", "macos-arm64"]


@pytest.fixture(scope="module", params=PLATFORMS)
def build(
    request: pytest.FixtureRequest, native_build: BuildFactory, tree_pin: Path
) -> BuildResult:
    result = native_build(tree_pin, request.param)
    assert result.mtp.supported, f"{request.param}: {result.mtp.describe()}"
    return result


def test_declared_functions_are_exported(build: BuildResult, tmp_path: Path) -> None:
    expected, source = expected_functions(build, tmp_path)
    assert expected.get("llama_mtp"), f"no llama_mtp functions in {source}"
    assert expected.get("llama"), f"no llama functions in {source}"
    missing = missing_functions(build, expected)
    assert not missing, (
        f"{build.platform.name}: {len(missing)} functions declared in {source} are not exported:\n"
        + "\n".join(missing)
    )


def test_wrapper_exports_only_its_api(build: BuildResult) -> None:
    exported = exported_functions(build.lib_dir / build.platform.library_file("llama_mtp"))
    api = {n for n in exported if n.startswith("llama_mtp_")}
    assert len(api) >= 10, sorted(exported)
    leaked = sorted(exported - api)
    if host_toolchain(build.platform).zig_target:
        # zig's Mach-O linker ignores export lists, so this (unshipped, CPU-only) build also
        # exports the C++ runtime zig links in statically: mangled C++ names, never a C one.
        # The runner's ld64 build gets -exported_symbol (native_wrapper/CMakeLists.txt).
        leaked = [n for n in leaked if not n.startswith("_Z")]
    assert not leaked, f"libllama_mtp exports more than llama_mtp_*: {leaked[:10]}"


def test_libraries_are_for_the_platform(build: BuildResult) -> None:
    wrong = {
        p.name: machine(p)
        for p in sorted(build.lib_dir.iterdir())
        if not p.is_symlink() and machine(p) != build.platform.machine
    }
    assert not wrong, f"{build.platform.name}: expected {build.platform.machine}, got {wrong}"


def test_manifest_is_the_contract_and_missing_names_are_reported(
    native_build: BuildFactory, tree_pin: Path, tmp_path: Path
) -> None:
    build = native_build(tree_pin, "linux-x86_64")
    manifest = tmp_path / "abi_manifest.json"
    functions = [
        {"name": "llama_backend_init", "library": "llama", "header": "llama.h"},
        {"name": "ggml_init", "library": "ggml", "header": "ggml.h"},
        {"name": "llama_mtp_step", "library": "llama_mtp", "header": "llama_mtp.h"},
        {"name": "llama_mtp_not_a_function", "library": "llama_mtp", "header": "llama_mtp.h"},
    ]
    manifest.write_text(json.dumps({"functions": functions}))
    expected, source = expected_functions(build, tmp_path, manifest)
    assert source == str(manifest)
    # ggml is held to nothing: its headers declare functions no build defines
    assert expected == {
        "llama": {"llama_backend_init"},
        "llama_mtp": {"llama_mtp_step", "llama_mtp_not_a_function"},
    }
    assert missing_functions(build, expected) == ["llama_mtp: llama_mtp_not_a_function"]
