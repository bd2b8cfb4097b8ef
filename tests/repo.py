"""The checkout the tests run in (the tool itself finds checkouts from the working directory)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def folder_files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (bytecode caches left out), by relative path."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }
