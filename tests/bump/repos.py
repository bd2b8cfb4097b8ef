"""Copies of this checkout's record for bump tests, and byte snapshots to compare them."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from tests.repo import REPO_ROOT

COPIED = ("generated", "releases.toml", "CHANGELOG.md")


def fake_repo(tmp_path: Path) -> Path:
    """A checkout holding what a bump changes, as committed here (pinned: the pin)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in COPIED:
        src = REPO_ROOT / name
        if src.is_dir():
            shutil.copytree(src, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, repo / name)
    return repo


def snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }
