"""Section 1: cold ``generate`` (one target, all targets) vs ctypeslib2's clang2py, same header."""

from __future__ import annotations

import compileall
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path
from typing import Any

from bench.stats import Series, check, log, ratio_series, run_measured

# clang2py reads llama.h with libclang; the clang bindings must match the libclang wheel.
CLANG2PY_REQUIREMENTS = ("ctypeslib2", "clang==18.1.8", "libclang==18.1.1")


def clang2py_venv(cache: Path) -> tuple[Path, Path]:
    """A private virtual environment for clang2py (both packages install a ``clang`` module, so
    it never shares the project's). Returns (clang2py executable, libclang folder)."""
    root = cache / "bench-venvs" / "clang2py"
    python = root / "bin" / "python"
    exe = root / "bin" / "clang2py"
    if not exe.is_file():
        log(f"creating {root} for clang2py")
        venv.EnvBuilder(with_pip=True, clear=True).create(root)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *CLANG2PY_REQUIREMENTS], check=True
        )
    found = subprocess.run(
        [str(python), "-c", "import clang, os; print(os.path.dirname(clang.__file__))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    native = Path(found) / "native"
    # ctypeslib looks for a versioned name; the wheel ships only libclang.so
    versioned = native / "libclang.so.18.1"
    if not versioned.exists():
        versioned.symlink_to("libclang.so")
    return exe, native


def run(tree: Path, repo: Path, cache: Path, repeats: int) -> dict[str, Any]:
    exe, native = clang2py_venv(cache)
    # What an installed wheel has (pip compiles it), and what clang2py's venv has: without it, a
    # machine with PYTHONDONTWRITEBYTECODE set recompiled llama-bindgen's modules on every run.
    compileall.compile_dir(str(repo / "generator"), quiet=1)
    compileall.compile_dir(str(repo / "bench"), quiet=1)
    freestanding = repo / "generator" / "freestanding"
    work = Path(tempfile.mkdtemp(prefix="bench-generate-"))
    env = {"PYTHONPATH": str(repo)}
    tools: dict[str, list[str]] = {
        "clang2py": [
            str(exe),
            str(tree / "include" / "llama.h"),
            "--clang-args",
            f"-nostdinc -I{freestanding} -I{tree / 'include'} -I{tree / 'ggml' / 'include'}",
            "-o",
            str(work / "clang2py_llama.py"),
        ],
        "generate_one_target": [
            sys.executable, "-m", "bench.generate_one_target", str(tree), str(work / "one")
        ],
        "generate_all_targets": [
            sys.executable, "-m", "generator", "generate", "--tree", str(tree),
            "--out", str(work / "all"),
        ],
    }  # fmt: skip
    tool_env = {"clang2py": {"LD_LIBRARY_PATH": str(native)}}
    wall = {name: Series("s") for name in tools}
    peak = {name: Series("MB") for name in tools}
    try:
        for i in range(repeats):
            for name, cmd in tools.items():
                r = check(run_measured(cmd, {**env, **tool_env.get(name, {})}), name)
                wall[name].add(r.wall_s)
                peak[name].add(r.peak_rss_mb)
                log(f"generation {i + 1}/{repeats} {name}: {r.wall_s:.2f} s {r.peak_rss_mb:.0f} MB")
        out_lines = {
            "clang2py": len((work / "clang2py_llama.py").read_text().splitlines()),
            "generate_one_target": _package_lines(work / "one" / "llama_bindings"),
            "generate_all_targets": _package_lines(work / "all" / "llama_bindings"),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "method": (
            "whole-process wall time and peak RSS (wait4) of a fresh process each run, the three "
            "tools interleaved; same llama.h, same freestanding headers (-nostdinc). clang2py: "
            "ctypeslib2 in its own venv, host triple, llama.h only. generate_one_target: "
            "llama-bindgen parse + emit for the host triple, llama.h only (no MTP wrapper). "
            "generate_all_targets: `llama-bindgen generate` as shipped (9 targets + wrapper "
            "header). Files stay in the OS page cache between runs; llama-bindgen's modules are "
            "byte-compiled first, as a wheel install does. Output lines: Python, stubs and cdef "
            "(not the JSON manifests)."
        ),
        "wall_s": {k: v.summary() for k, v in wall.items()},
        "peak_rss_mb": {k: v.summary() for k, v in peak.items()},
        "wall_ratio_vs_clang2py": {
            k: ratio_series(wall[k], wall["clang2py"]).summary() for k in tools if k != "clang2py"
        },
        "output_lines": out_lines,
    }


def _package_lines(folder: Path) -> int:
    """Lines of code in the package (Python, stubs, the cdef), not its JSON data files."""
    code = (p for p in folder.iterdir() if p.suffix in (".py", ".pyi", ".h"))
    return sum(len(p.read_text().splitlines()) for p in code)
