"""A Windows program links against the DLLs, and the MinGW runtime ships beside them.

(Cross-built programs also run here: tests/native/test_wrapper_errors.py runs the wrapper's error
cases under qemu and wine.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.native.host import host_toolchain
from tests.conftest import BuildFactory
from tests.native.conftest import compile_cases

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]


def test_windows_program_links_against_dlls(
    native_build: BuildFactory, tree_pin: Path, tmp_path: Path
) -> None:
    build = native_build(tree_pin, "windows-x86_64")
    exe = compile_cases(
        build, host_toolchain(build.platform).c_compiler, tmp_path, ["-D__USE_MINGW_ANSI_STDIO=1"]
    )
    with exe.open("rb") as fh:
        assert fh.read(2) == b"MZ"
    for name in host_toolchain(build.platform).runtime_libraries:
        assert (build.lib_dir / name).is_file(), f"{name} not shipped beside the DLLs"
