"""``llama-bindgen doctor`` (``bump/readiness.py``): on this machine, which CI sets up with every
package the registry lists, every platform the suite gates is ready and nothing is missing; in a
sandbox whose PATH hides some tools, the platforms needing them are left out with the reason and
the install line names the packages that bring them back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from generator.bump.readiness import key_readiness
from tests.repo import REPO_ROOT

GATED_HERE = ("linux-aarch64", "linux-x86_64", "linux-x86_64-vulkan", "windows-x86_64")
HIDDEN = ("qemu-aarch64", "glslc", "ninja", "x86_64-w64-mingw32-gcc-posix")


def _doctor(*args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [sys.executable, "-m", "generator", "doctor", *args],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


def _sandbox(folder: Path, hidden: tuple[str, ...]) -> str:
    """A PATH of one folder holding links to every command on this PATH but ``hidden``."""
    folder.mkdir()
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if not entry or not os.path.isdir(entry):
            continue
        for name in os.listdir(entry):
            target = Path(entry) / name
            link = folder / name
            if name in hidden or link.exists() or not os.access(target, os.X_OK):
                continue
            link.symlink_to(target)
    return str(folder)


def test_this_machine_has_everything_the_suite_gates() -> None:
    proc = _doctor()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = {line.split()[0]: line for line in proc.stdout.splitlines() if line.strip()}
    for key in GATED_HERE:
        assert lines[key].endswith("builds here, every gate runs"), lines[key]
    assert "nothing missing" in proc.stdout
    assert "macos-arm64" in lines and "not on this machine" in lines["macos-arm64"]


def test_hidden_tools_are_named_with_the_packages_that_bring_them(tmp_path: Path) -> None:
    proc = _doctor("--json", path=_sandbox(tmp_path / "bin", HIDDEN))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    record = json.loads(proc.stdout)
    keys = {k["key"]: k for k in record["keys"]}
    assert "qemu-aarch64" in keys["linux-aarch64"]["cannot_run"]
    assert keys["linux-aarch64"]["packages"] == ["ninja-build", "qemu-user"]
    assert "x86_64-w64-mingw32-gcc-posix" in keys["windows-x86_64"]["cannot_build"]
    assert "g++-mingw-w64-x86-64" in keys["windows-x86_64"]["packages"]
    assert "glslc" in keys["linux-x86_64-vulkan"]["cannot_build"]
    assert not keys["linux-x86_64"]["ready"]  # ninja is missing: nothing builds
    install = record["install"].split()
    for package in ("qemu-user", "g++-mingw-w64-x86-64", "glslc", "ninja-build"):
        assert package in install
    assert "wine64" not in install  # wine is still here


def test_a_ready_key_has_no_packages_to_add() -> None:
    found = key_readiness("linux-x86_64")
    assert found.ready and found.packages == () and found.verdict == ""
