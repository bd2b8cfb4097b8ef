"""generator.symbols on small libraries compiled here: what is exported, and what is not."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from generator.native.host import host_toolchain
from generator.platforms import get_platform
from generator.symbols import binary_format, exported_functions, machine

# the platforms whose compilers this machine has (.ci/run installs them; macOS: zig)
BUILT_HERE = ("linux-x86_64", "linux-aarch64", "windows-x86_64", "macos-arm64")

SOURCE = """
#ifdef _WIN32
#define EXPORT __declspec(dllexport)
#else
#define EXPORT __attribute__((visibility("default")))
#endif
EXPORT int visible_one(int x) { return x + 1; }
EXPORT int visible_two(void) { return 2; }
EXPORT int exported_data = 3;
__attribute__((visibility("hidden"))) int hidden_fn(void) { return 4; }
static int local_fn(void) { return 5; }
int uses_local(void);
EXPORT int uses_local(void) { return local_fn() + hidden_fn(); }
"""


def _compile(compiler: str, out: Path, tmp: Path) -> Path:
    if shutil.which(compiler) is None:
        pytest.fail(f"{compiler} is not installed")
    src = tmp / "lib.c"
    src.write_text(SOURCE)
    proc = subprocess.run(
        [compiler, "-shared", "-fPIC", "-fvisibility=hidden", "-O1", str(src), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.parametrize("platform", BUILT_HERE)
def test_exported_functions(platform: str, tmp_path: Path) -> None:
    plat = get_platform(platform)
    lib = _compile(
        host_toolchain(plat).c_compiler, tmp_path / f"libprobe{plat.shared_suffix}", tmp_path
    )
    assert binary_format(lib) == plat.binary_format
    assert machine(lib) == plat.machine
    names = exported_functions(lib)
    assert {"visible_one", "visible_two", "uses_local"} <= names
    assert not {"hidden_fn", "local_fn"} & names
    if plat.binary_format in ("elf", "macho"):
        assert "exported_data" not in names  # ELF, Mach-O: functions only
