"""Every function the bindings declare is exported by the built libraries, on every platform."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.build.native import BuildResult
from generator.symbols import exported_functions, exported_functions_of, machine
from tests.native.conftest import BuildFactory
from tests.native.expected_symbols import expected_functions, library_files

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

PLATFORMS = ["linux-x86_64", "linux-aarch64", "windows-x86_64"]


@pytest.fixture(scope="module", params=PLATFORMS)
def build(
    request: pytest.FixtureRequest, native_build: BuildFactory, tree_b11312: Path
) -> BuildResult:
    result = native_build(tree_b11312, request.param)
    assert result.mtp.supported, f"{request.param}: {result.mtp.describe()}"
    return result


def test_declared_functions_are_exported(build: BuildResult, tmp_path: Path) -> None:
    expected, source = expected_functions(build, tmp_path)
    assert expected.get("llama_mtp"), f"no llama_mtp functions in {source}"
    assert expected.get("llama"), f"no llama functions in {source}"
    missing: list[str] = []
    for library, names in sorted(expected.items()):
        files = library_files(build, library)
        absent = [str(f) for f in files if not f.is_file()]
        assert not absent, f"{build.platform.name}: library files missing: {absent}"
        exported = exported_functions_of(files)
        missing += [f"{library}: {name}" for name in sorted(names - exported)]
    assert not missing, (
        f"{build.platform.name}: {len(missing)} functions declared in {source} are not exported:\n"
        + "\n".join(missing)
    )


def test_wrapper_exports_only_its_api(build: BuildResult) -> None:
    exported = exported_functions(build.lib_dir / build.platform.library_file("llama_mtp"))
    api = {n for n in exported if n.startswith("llama_mtp_")}
    assert len(api) >= 10, sorted(exported)
    leaked = sorted(exported - api)
    assert not leaked, f"libllama_mtp exports more than llama_mtp_*: {leaked[:10]}"


def test_libraries_are_for_the_platform(build: BuildResult) -> None:
    wrong = {
        p.name: machine(p)
        for p in sorted(build.lib_dir.iterdir())
        if not p.is_symlink() and machine(p) != build.platform.machine
    }
    assert not wrong, f"{build.platform.name}: expected {build.platform.machine}, got {wrong}"
