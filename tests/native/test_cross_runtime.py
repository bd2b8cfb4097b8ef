"""Cross builds do more than link: aarch64 programs run under qemu, Windows programs link."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import BuildFactory
from tests.native.conftest import compile_cases, parse_cases

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]


def test_aarch64_program_runs_under_qemu(
    native_build: BuildFactory,
    tree_b11312: Path,
    tmp_path: Path,
    test_models: tuple[Path, Path],
) -> None:
    build = native_build(tree_b11312, "linux-aarch64")
    qemu = shutil.which("qemu-aarch64")
    if qemu is None:
        pytest.fail("qemu-aarch64 is not installed (Debian package qemu-user)")
    exe = compile_cases(build, build.platform.c_compiler, tmp_path)
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join([str(build.lib_dir), *build.platform.runtime_dirs])
    agree, plain = test_models
    proc = subprocess.run(
        [*build.platform.runner, str(exe), str(agree), str(plain)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0 and "DONE" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    cases, info = parse_cases(proc.stdout)
    assert info["abi_version"] and len(info["llama_commit"]) == 40
    assert cases["create_null_context"][0] != 0
    assert cases["create_ok"][0] == 0, cases["create_ok"]
    assert cases["accept_too_many"][0] != 0
    assert info["greedy_identical"] == "1"


def test_windows_program_links_against_dlls(
    native_build: BuildFactory, tree_b11312: Path, tmp_path: Path
) -> None:
    build = native_build(tree_b11312, "windows-x86_64")
    exe = compile_cases(build, build.platform.c_compiler, tmp_path, ["-D__USE_MINGW_ANSI_STDIO=1"])
    with exe.open("rb") as fh:
        assert fh.read(2) == b"MZ"
    for name in build.platform.runtime_libraries:
        assert (build.lib_dir / name).is_file(), f"{name} not shipped beside the DLLs"
