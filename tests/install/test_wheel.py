"""The tool installed from its wheel works outside any checkout, and beside other copies.

The wheel is built offline from a copy of the checkout (no build isolation: setuptools and wheel
come from the dev dependencies) and installed without dependencies into a fresh virtual
environment; the dependencies come from this interpreter through a ``.pth`` line, after the new
environment's own site-packages, so the ``generator`` that runs is the wheel's. Everything runs
in a folder with no ``releases.toml`` above it, with the test cache (trees are not downloaded).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from generator.native.build import build_native
from generator.native.build_info import wrapper_sources_sha256
from generator.paths import CACHE_ENV, REPO_ENV, default_cache_dir
from tests.repo import REPO_ROOT, folder_files
from tests.trees import PIN, llama_tree

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

SOURCES = (
    "pyproject.toml",
    "README.md",
    "LICENSE",
    "releases.toml",
    "tag-sources.toml",
    "generator",
)


def _copy_sources(dest: Path) -> Path:
    dest.mkdir()
    for name in SOURCES:
        src = REPO_ROOT / name
        if src.is_dir():
            shutil.copytree(
                src, dest / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with the wheel installed; returns its ``bin`` folder."""
    base = tmp_path_factory.mktemp("wheel")
    src = _copy_sources(base / "src")
    wheels = base / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(wheels),
            str(src),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = wheels.glob("llama_bindgen-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bin_dir = venv / "bin"
    subprocess.run(
        [
            str(bin_dir / "python"),
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    purelib = subprocess.run(
        [str(bin_dir / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    deps = sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})
    (Path(purelib) / "zz_test_dependencies.pth").write_text("\n".join(deps) + "\n")
    return bin_dir


def _env(bin_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", REPO_ENV)}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env[CACHE_ENV] = str(default_cache_dir())
    return env


def _tool(bin_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / "llama-bindgen"), *args],
        cwd=cwd,
        env=_env(bin_dir),
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )


def _outside(tmp_path: Path) -> Path:
    here = tmp_path / "outside"
    here.mkdir()
    assert not any((p / "releases.toml").exists() for p in (here, *here.parents))
    return here


def test_the_wheel_runs_its_own_copy(installed: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(installed / "python"), "-c", "import generator; print(generator.__file__)"],
        cwd=_outside(tmp_path),
        env=_env(installed),
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(proc.stdout.strip()).is_relative_to(installed.parent)


def test_fetch_and_generate_outside_a_checkout(installed: Path, tmp_path: Path) -> None:
    here = _outside(tmp_path)
    fetched = _tool(installed, here, "fetch", PIN)
    assert fetched.returncode == 0, fetched.stderr
    tree = Path(fetched.stdout.strip().splitlines()[-1])
    assert tree == llama_tree(PIN)

    out = here / "out"
    generated = _tool(installed, here, "generate", "--tree", str(tree), "--out", str(out))
    assert generated.returncode == 0, generated.stderr
    # the shipped templates and wrapper header give exactly the committed bindings
    committed = REPO_ROOT / "generated" / "llama_bindings"
    assert folder_files(out / "llama_bindings") == folder_files(committed)


@pytest.mark.parametrize(
    "args",
    [
        ("generate", "--tree", "{tree}"),
        ("bump", "b11312"),
        ("gates", "--tree", "{tree}", "--platform", "linux-x86_64"),
        ("matrix", "--check"),
    ],
    ids=lambda a: a[0],
)
def test_checkout_commands_name_what_is_missing(
    installed: Path, tmp_path: Path, args: tuple[str, ...]
) -> None:
    tree = str(llama_tree(PIN))
    proc = _tool(installed, _outside(tmp_path), *(a.format(tree=tree) for a in args))
    assert proc.returncode == 2, proc.stderr
    assert "needs a llama-bindgen checkout" in proc.stderr
    assert "--repo" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_build_outside_a_checkout_shares_the_cache(installed: Path, tmp_path: Path) -> None:
    """The wheel's copy of the wrapper and this checkout's build one tree into one cache,
    through one CMake folder (both configure from the staged copy of the wrapper project)."""
    tree = llama_tree(PIN)
    here_build = build_native(tree, "linux-x86_64", out=tmp_path / "checkout-out")
    proc = _tool(
        installed,
        _outside(tmp_path),
        "build",
        "--tree",
        str(tree),
        "--platform",
        "linux-x86_64",
        "--out",
        str(tmp_path / "wheel-out"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    platform_dir = Path(proc.stdout.strip().splitlines()[-1])
    info = json.loads((platform_dir / "build-info.json").read_text())
    assert info["wrapper_sources_sha256"] == wrapper_sources_sha256()
    assert (platform_dir / "lib" / "libllama_mtp.so").is_file()
    # and the checkout builds again into the same cache afterwards
    again = build_native(tree, "linux-x86_64", out=tmp_path / "checkout-out", force=True)
    assert again.platform_dir == here_build.platform_dir
