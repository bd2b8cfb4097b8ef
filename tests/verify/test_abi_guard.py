"""The load-time ABI guard, end to end: real builds, real generated bindings, each load in its own
process so that a crash would show as a crash (a signal), not as a passing test."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from generator.emit import emit_package
from generator.native.build import BuildResult, abi_identity_source, build_interface
from generator.native.host import host_toolchain
from generator.parse.frontend import parse_interface, tree_source
from generator.parse.options import HOST_TARGET, ParseOptions
from generator.paths import wrapper_dir
from generator.platforms import get_platform
from generator.sources import mtmd_api
from generator.sources.licenses import llama_license
from generator.sources.tree import Tree
from tests.conftest import BuildFactory
from tests.repo import REPO_ROOT
from tests.trees import PIN, llama_tree

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]
WRAPPER_HEADER = wrapper_dir() / "llama_mtp.h"
PACKAGE = REPO_ROOT / "generated" / "llama_bindings"
LOAD_AND_CALL = """
import json, sys
import llama_bindings as lb
try:
    libs = lb.load(sys.argv[1])
except lb.BindingsAbiError as exc:
    print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
    raise SystemExit(0)
params = libs.llama.llama_context_default_params()
print(json.dumps({"error": None, "n_ctx": int(params.n_ctx), "hashed": "hashlib" in sys.modules}))
"""


def bindings(tree: Path, out: Path, wrapper: Path | None) -> Path:
    """Generate bindings for ``tree`` into ``out`` (host target only: enough to load here)."""
    api = parse_interface(ParseOptions(tree, wrapper, (HOST_TARGET,)), tree_source(tree))
    emit_package(api, out, llama_license=llama_license(tree))
    return out


def load_in_subprocess(bindings_parent: Path, lib_dir: Path) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(LOAD_AND_CALL), str(lib_dir)],
        cwd=bindings_parent,
        env={**os.environ, "PYTHONPATH": str(bindings_parent)},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, f"load ended with {proc.returncode} (signal?)\n{proc.stderr}"
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def build_new(native_build: BuildFactory, tree_pin: Path) -> BuildResult:
    return native_build(tree_pin, "linux-x86_64")


@pytest.fixture(scope="module")
def build_old(native_build: BuildFactory, tree_63d93d1: Path) -> BuildResult:
    return native_build(tree_63d93d1, "linux-x86_64")


@pytest.fixture(autouse=True)
def own_seals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's loads seal into a file of its own (verified_files), empty at the start."""
    seals = tmp_path / "seals" / "verified-libraries.txt"
    monkeypatch.setenv("LLAMA_BINDGEN_VERIFIED_CACHE", str(seals))
    return seals


def test_matching_bindings_load_and_call(build_new: BuildResult, own_seals: Path) -> None:
    result = load_in_subprocess(REPO_ROOT / "generated", build_new.lib_dir)
    assert result == {"error": None, "n_ctx": 512, "hashed": True}
    assert own_seals.is_file()
    # the same files again: sealed, so neither hashed nor compared, and the result the same
    again = load_in_subprocess(REPO_ROOT / "generated", build_new.lib_dir)
    assert again == {"error": None, "n_ctx": 512, "hashed": False}


def test_seals_off_hash_every_load(
    build_new: BuildResult, own_seals: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLAMA_BINDGEN_VERIFIED_CACHE", "off")
    for _ in range(2):
        result = load_in_subprocess(REPO_ROOT / "generated", build_new.lib_dir)
        assert result == {"error": None, "n_ctx": 512, "hashed": True}
    assert not own_seals.exists()


def test_sealed_libraries_still_refuse_other_bindings(
    build_new: BuildResult, tree_63d93d1: Path, tmp_path: Path
) -> None:
    """A seal covers these files with these bindings: other bindings compare them again."""
    assert load_in_subprocess(REPO_ROOT / "generated", build_new.lib_dir)["error"] is None
    old = bindings(tree_63d93d1, tmp_path / "old", None)
    result = load_in_subprocess(old, build_new.lib_dir)
    assert result["error"] == "AbiMismatchError"


def _pin_label() -> str:
    """How the pinned tree's commit is named: the commit, or its label when the source states
    none."""
    return Tree.read(llama_tree(PIN)).commit_label


def test_new_bindings_refuse_old_libraries(build_old: BuildResult) -> None:
    result = load_in_subprocess(REPO_ROOT / "generated", build_old.lib_dir)
    assert result["error"] == "AbiMismatchError"
    message = str(result["message"])
    assert "63d93d17336e41e4cc73a64451e5b1d2477abdb1" in message
    assert _pin_label() in message
    assert "llama_context_params" in message


def test_old_bindings_refuse_new_libraries(
    build_new: BuildResult, tree_63d93d1: Path, tmp_path: Path
) -> None:
    old = bindings(tree_63d93d1, tmp_path, None)
    result = load_in_subprocess(old, build_new.lib_dir)
    assert result["error"] == "AbiMismatchError"
    assert f"libraries built from {_pin_label()}" in str(result["message"])


def test_undeclared_export_is_a_missing_symbol(
    build_new: BuildResult, tree_pin: Path, tmp_path: Path
) -> None:
    header = tmp_path / "hdr" / "llama_mtp.h"
    header.parent.mkdir()
    text = WRAPPER_HEADER.read_text()
    extra = "LLAMA_MTP_API int32_t llama_mtp_not_in_any_build(void);\n"
    header.write_text(text.replace("#ifdef __cplusplus\n}", extra + "#ifdef __cplusplus\n}", 1))
    assert "llama_mtp_not_in_any_build" in header.read_text()
    out = bindings(tree_pin, tmp_path / "pkg", header)
    result = load_in_subprocess(out, build_new.lib_dir)
    assert result["error"] == "MissingSymbolError"
    assert "llama_mtp_not_in_any_build" in str(result["message"])


def _identity_library(tree: Path, lib_dir: Path) -> None:
    """Put in ``lib_dir`` (a copy of a build) the ABI identity library that ``build`` makes for
    ``tree``: its C source generated from the tree's headers as the build generates it, compiled
    with the host's compiler and the wrapper project's flags; the build record then lists it, as
    a build's own record does."""
    api, headers = build_interface(Tree.read(tree))
    source = lib_dir.parent / "abi" / "llama_bindgen_abi.c"
    source.parent.mkdir()
    source.write_text(abi_identity_source(api, headers), encoding="utf-8")
    includes = [wrapper_dir(), tree / "include", tree / "ggml" / "include"]
    includes.append(mtmd_api.include_dir(tree))
    target = (lib_dir / "libllama_bindgen_abi.so").resolve()
    compiler = host_toolchain(get_platform("linux-x86_64")).c_compiler
    subprocess.run(
        [compiler, "-std=c11", "-shared", "-fPIC", "-fvisibility=hidden",
         *(f"-I{folder}" for folder in includes), "-o", str(target), str(source)],
        check=True,
    )  # fmt: skip
    info_path = lib_dir.parent / "build-info.json"
    info = json.loads(info_path.read_text())
    info["libraries"][f"lib/{target.name}"] = hashlib.sha256(target.read_bytes()).hexdigest()
    info_path.write_text(json.dumps(info), encoding="utf-8")


def test_inserted_field_is_refused(build_new: BuildResult, tree_pin: Path, tmp_path: Path) -> None:
    """The pinned build whose headers' llama_context_params gained a field, loaded with the
    unmodified committed bindings. What the guard reads of a build is its record and its ABI
    identity library, made from the headers the build compiled: so the pinned build's libraries
    with the identity library of a copy of the pinned headers with the field inserted (as a real
    upstream change would) prove the refusal as a rebuild of the patched tree did, without
    compiling llama.cpp again (a 4.5-minute cold build for one struct's layout)."""
    tree = tmp_path / "llama.cpp"
    shutil.copytree(tree_pin, tree, symlinks=True)
    llama_h = tree / "include" / "llama.h"
    anchor = "        uint32_t n_rs_seq;"
    text = llama_h.read_text()
    assert text.count(anchor) == 1
    llama_h.write_text(text.replace(anchor, "        uint64_t inserted_by_test;\n" + anchor, 1))
    lib_dir = _copy_build(build_new, tmp_path / "native" / "linux-x86_64")
    _identity_library(tree, lib_dir)
    result = load_in_subprocess(REPO_ROOT / "generated", lib_dir)
    assert result["error"] == "AbiMismatchError"
    message = str(result["message"])
    assert "offsetof(llama_context_params, n_rs_seq)" in message
    manifest = json.loads((PACKAGE / "abi_manifest.json").read_text())
    size = manifest["targets"][HOST_TARGET]["structs"]["llama_context_params"]["size"]
    grown = size + 8  # the inserted uint64_t sits where n_rs_seq (8-aligned) was
    assert f"sizeof(llama_context_params): library {grown}, bindings {size}" in message


def test_the_unpatched_identity_library_is_accepted(
    build_new: BuildResult, tree_pin: Path, tmp_path: Path
) -> None:
    """The control of the test above: the identity library made the same way from the pinned
    headers themselves loads (so the refusal is the inserted field's, not the way it was made)."""
    lib_dir = _copy_build(build_new, tmp_path / "native" / "linux-x86_64")
    _identity_library(tree_pin, lib_dir)
    assert load_in_subprocess(REPO_ROOT / "generated", lib_dir)["error"] is None


def _copy_build(build: BuildResult, dest: Path) -> Path:
    """A copy of a build folder (lib/ with its links, build-info.json), as a release unpacks."""
    shutil.copytree(build.platform_dir, dest, symlinks=True)
    return dest / "lib"


@pytest.mark.parametrize("sealed_first", [False, True], ids=["fresh", "sealed-first"])
@pytest.mark.parametrize("how", ["file-overwritten", "link-replaced"])
def test_a_libllama_from_another_build_is_refused_before_loading(
    build_new: BuildResult, build_old: BuildResult, tmp_path: Path, how: str, sealed_first: bool
) -> None:
    """Users swap libllama for one from another build (to get a GPU build, say): the ABI probe
    beside it still describes the first build, so only the build record can catch it; also
    after the folder loaded once and was sealed (verified_files), the swap changes the file's
    identity."""
    lib_dir = _copy_build(build_new, tmp_path / "linux-x86_64")
    if sealed_first:
        assert load_in_subprocess(REPO_ROOT / "generated", lib_dir)["error"] is None
    old = (build_old.lib_dir / "libllama.so").resolve()
    if how == "file-overwritten":  # cp old libllama.so lib/libllama.so: through the link
        shutil.copyfile(old, (lib_dir / "libllama.so").resolve())
    else:  # the link replaced by a plain file
        (lib_dir / "libllama.so").unlink()
        shutil.copyfile(old, lib_dir / "libllama.so")
    result = load_in_subprocess(REPO_ROOT / "generated", lib_dir)
    assert result["error"] == "ForeignLibraryError"
    message = str(result["message"])
    assert "libllama.so" in message and "another build" in message
    if how == "file-overwritten":
        assert hashlib.sha256(old.read_bytes()).hexdigest() in message


def test_libraries_without_their_build_record_are_refused(
    build_new: BuildResult, tmp_path: Path
) -> None:
    lib_dir = tmp_path / "lib"
    shutil.copytree(build_new.lib_dir, lib_dir, symlinks=True)
    result = load_in_subprocess(REPO_ROOT / "generated", lib_dir)
    assert result["error"] == "ForeignLibraryError"
    assert "no build-info.json" in str(result["message"])
