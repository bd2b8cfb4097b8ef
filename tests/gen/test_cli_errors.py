"""Bad inputs end in one line and exit status 2, never a traceback (and diff writes nothing
it was not asked to)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from generator.paths import repo_root

PACKAGE = repo_root() / "generated" / "llama_bindings"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "generator", *args],
        capture_output=True, text=True, cwd=cwd, timeout=300,
        env={**os.environ, "PYTHONPATH": str(repo_root())},
    )  # fmt: skip


def _one_line_error(proc: subprocess.CompletedProcess[str], verb: str) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith(f"llama-bindgen {verb}: error: "), proc.stderr
    return errors[0]


def test_generate_from_a_missing_tree(tmp_path: Path) -> None:
    proc = _cli("generate", "--tree", "/nonexistent", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert "/nonexistent" in _one_line_error(proc, "generate")


@pytest.mark.needs_tree
def test_generate_for_an_unknown_target(tree_b11312: Path, tmp_path: Path) -> None:
    proc = _cli("generate", "--tree", str(tree_b11312), "--target", "bogus-triple",
                "--out", str(tmp_path / "o"), cwd=tmp_path)  # fmt: skip
    assert "bogus-triple" in _one_line_error(proc, "generate")
    assert not (tmp_path / "o").exists()


def test_diff_of_a_file_that_is_not_an_ir(tmp_path: Path) -> None:
    proc = _cli("diff", str(repo_root() / "README.md"), str(PACKAGE), cwd=tmp_path)
    assert "README.md: not an ir.json" in _one_line_error(proc, "diff")


def test_diff_writes_only_what_is_asked(tmp_path: Path) -> None:
    ir = str(PACKAGE / "ir.json")
    proc = _cli("diff", ir, ir, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert list(tmp_path.iterdir()) == [], "diff wrote files nobody asked for"
    proc = _cli("diff", ir, ir, "--json", "r.json", cwd=tmp_path)
    assert proc.returncode == 0 and (tmp_path / "r.json").is_file(), proc.stderr
