"""The file names a ``set(<variable> ...)`` of a tree's CMake file lists (what the mtmd and RPC
rules read of a tree: which headers upstream's CMake treats as public)."""

from __future__ import annotations

import re
from pathlib import Path


def listed_files(cmake_file: Path, variable: str) -> tuple[str, ...] | None:
    """The file names ``set(<variable> ...)`` in ``cmake_file`` lists, or None without one."""
    if not cmake_file.is_file():
        return None
    text = cmake_file.read_text(encoding="utf-8", errors="replace")
    found = re.search(rf"set\(\s*{re.escape(variable)}\s+([^)]*)\)", text)
    if found is None:
        return None
    return tuple(re.split(r"[/\\]", item)[-1] for item in found.group(1).split())
