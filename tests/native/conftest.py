"""Fixtures for the native tests (the build fixture, native_build, is in tests/conftest.py).

A build that cannot run because a toolchain is missing fails the test (CI must install it).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from generator.native.build import BuildResult
from generator.smoke.c_driver import link_arguments

CASES_SOURCE = Path(__file__).with_name("mtp_cases.c")


@pytest.fixture(scope="session")
def test_models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(agree, plain): a tiny qwen35 model with one NextN layer, and one without."""
    try:
        from generator.testmodel import write_test_model
    except ImportError as exc:
        pytest.fail(f"generator.testmodel is needed to write the test models: {exc}")
    folder = tmp_path_factory.mktemp("models")
    agree = write_test_model(folder / "agree.gguf", "agree", seed=0)
    plain = write_test_model(folder / "plain.gguf", "plain", seed=0)
    return agree, plain


@pytest.fixture(scope="session")
def two_nextn_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A qwen35 model with two NextN layers, which llama.cpp's qwen35 MTP graph cannot take."""
    from generator.testmodel import write_test_model

    return write_test_model(
        tmp_path_factory.mktemp("models") / "two.gguf", "agree", seed=0, nextn_layers=2
    )


def compile_cases(
    build: BuildResult, compiler: str, out: Path, extra: list[str] | None = None
) -> Path:
    """Compile tests/native/mtp_cases.c against a build's headers and libraries."""
    exe = out / ("mtp_cases.exe" if build.platform.binary_format == "pe" else "mtp_cases")
    libs = link_arguments(build.platform, build.lib_dir, ("llama_mtp", "llama"))
    argv = [
        compiler,
        "-std=c11",
        "-O1",
        "-Wall",
        "-Werror",
        f"-I{build.include_dir}",
        str(CASES_SOURCE),
        "-o",
        str(exe),
        *libs,
        *(extra or []),
    ]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"compiling {CASES_SOURCE.name} with {compiler} failed:\n{proc.stderr}")
    return exe


def parse_cases(stdout: str) -> tuple[dict[str, tuple[int, str]], dict[str, str]]:
    """CASE and INFO lines of mtp_cases' output."""
    cases: dict[str, tuple[int, str]] = {}
    info: dict[str, str] = {}
    for line in stdout.splitlines():
        if line.startswith("CASE "):
            parts = line.split(" ", 3)
            cases[parts[1]] = (int(parts[2]), parts[3] if len(parts) > 3 else "")
        elif line.startswith("INFO "):
            parts = line.split(" ", 2)
            info[parts[1]] = parts[2] if len(parts) > 2 else ""
    return cases, info
