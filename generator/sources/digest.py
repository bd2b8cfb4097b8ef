"""A content digest of a llama.cpp tree that does not depend on how the tree was packed.

The digest covers the files a build and the parser read: the top-level entries named in
``DIGEST_SCOPE``, minus any path with a component that starts with a dot (VCS and CI metadata
that packers keep or drop at will). Each covered entry contributes one line

    ``F <mode> <sha256 of content> <posix path>`` for a regular file (mode ``x`` or ``-``)
    ``L - <sha256 of link target> <posix path>`` for a symbolic link

and the digest is the sha256 of those lines sorted by path. Timestamps, owners, the archive's
top-level folder name and member order do not take part, so a GitHub archive, a PyPI sdist's
vendored copy and a local checkout of the same commit give the same digest.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from generator.hashing import file_sha256

DIGEST_ALGORITHM = "llama-bindgen-tree-v1"
DIGEST_SCOPE: tuple[str, ...] = (
    "CMakeLists.txt",
    "LICENSE",
    "cmake",
    "common",
    "examples",
    "ggml",
    "include",
    "src",
    "tools",
    "vendor",
)


def _entry_line(root: Path, path: Path) -> str | None:
    rel = path.relative_to(root).as_posix()
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
        return f"L - {hashlib.sha256(target.encode()).hexdigest()} {rel}"
    if stat.S_ISREG(st.st_mode):
        mode = "x" if st.st_mode & 0o111 else "-"
        return f"F {mode} {file_sha256(path)} {rel}"
    return None


def _walk(root: Path, top: Path) -> list[Path]:
    if top.is_symlink() or top.is_file():
        return [top]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        base = Path(dirpath)
        for d in dirnames:
            if (base / d).is_symlink():
                found.append(base / d)
        found.extend(base / f for f in filenames if not f.startswith("."))
    return found


def tree_digest(root: Path) -> str:
    """The ``sha256:...`` content digest of the tree at ``root`` (see module docs)."""
    lines: list[str] = []
    for name in DIGEST_SCOPE:
        top = root / name
        if not (top.exists() or top.is_symlink()):
            continue
        for path in _walk(root, top):
            line = _entry_line(root, path)
            if line is not None:
                lines.append(line)
    lines.sort(key=lambda line: line.split(" ", 3)[3])
    h = hashlib.sha256()
    h.update(f"{DIGEST_ALGORITHM}\n".encode())
    for line in lines:
        h.update(line.encode("utf-8", "surrogateescape"))
        h.update(b"\n")
    return f"sha256:{h.hexdigest()}"
