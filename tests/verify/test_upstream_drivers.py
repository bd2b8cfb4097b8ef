"""generator.verify.upstream_drivers without building: which libraries the programs may run on,
what makes a build reusable, how they are started. (tests/realmodel builds and runs them.)"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from generator.errors import UsageError
from generator.sources.tree import Tree
from generator.verify import upstream_drivers as ud

COMMIT = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"


def _tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path / "tree", "b11312", "b11312", COMMIT, "sha256:" + "0" * 64, "test")


def _build(tmp_path: Path, commit: str) -> Path:
    lib = tmp_path / "build" / "lib"
    lib.mkdir(parents=True)
    (lib.parent / "build-info.json").write_text(json.dumps({"commit": commit}))
    return lib


def test_the_programs_run_only_on_a_build_of_their_own_tree(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not the lib/ folder of a llama-bindgen build"):
        ud._check_libraries(_tree(tmp_path), tmp_path)
    other = _build(tmp_path, "63d93d17336e41e4cc73a64451e5b1d2477abdb1")
    with pytest.raises(UsageError, match=f"a build of 63d93d17336e.*, not of {COMMIT}"):
        ud._check_libraries(_tree(tmp_path), other)


def test_a_build_is_reused_only_while_its_record_holds(tmp_path: Path) -> None:
    tree, bin_dir = _tree(tmp_path), tmp_path / "bin"
    built = tmp_path / "cmake" / "bin"
    built.mkdir(parents=True)
    for name in (*ud.DRIVERS, "libllama-common.so.0.5.0"):
        (built / name).write_bytes(name.encode())
    (built / "libllama-common.so.0").symlink_to("libllama-common.so.0.5.0")
    options = ud._options()
    ud._install(tmp_path, bin_dir, tree, options)
    assert (bin_dir / "libllama-common.so.0").is_symlink()
    assert ud._record_current(bin_dir, tree, options)
    assert not ud._record_current(bin_dir, tree, {**options, "GGML_NATIVE": "ON"})
    (bin_dir / "llama-simple").write_bytes(b"changed")
    assert not ud._record_current(bin_dir, tree, options)


def test_the_options_are_the_host_builds_with_the_examples_on() -> None:
    options = ud._options()
    assert options["CMAKE_BUILD_TYPE"] == "Release" and options["GGML_NATIVE"] == "OFF"
    assert options["LLAMA_BUILD_EXAMPLES"] == options["LLAMA_BUILD_COMMON"] == "ON"
    assert "LLAMA_MTP" not in options  # the wrapper project's option, not upstream's


def test_the_programs_find_their_own_folder_then_the_host_build(tmp_path: Path) -> None:
    drivers = ud.UpstreamDrivers(tmp_path / "bin", tmp_path / "lib", COMMIT)
    env = drivers.environment()
    var = "DYLD_LIBRARY_PATH" if sys.platform == "darwin" else "LD_LIBRARY_PATH"
    assert env[var] == os.pathsep.join([str(tmp_path / "bin"), str(tmp_path / "lib")])
    with pytest.raises(UsageError, match="unknown upstream driver 'llama-cli'"):
        drivers.program("llama-cli")
