"""Small synthetic llama.cpp-shaped trees and archives for source-layer tests."""

from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass
from pathlib import Path

FAKE_FILES: dict[str, bytes] = {
    "include/llama.h": b"#pragma once\n#define LLAMA_CONTEXT_TYPE_MTP 1\n",
    "src/llama.cpp": b"int llama_answer(void) { return 42; }\n",
    "ggml/include/ggml.h": b"#pragma once\n",
    "CMakeLists.txt": b"project(fake C)\n",
}


def write_tree(root: Path, files: dict[str, bytes] | None = None) -> Path:
    for rel, data in (files or FAKE_FILES).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


@dataclass
class Member:
    name: str
    data: bytes = b""
    kind: bytes = tarfile.REGTYPE
    linkname: str = ""
    mtime: int = 0


def make_tar(
    path: Path,
    members: list[Member],
    *,
    pax_comment: str = "",
) -> Path:
    """A .tar.gz with exactly ``members`` (and a git-archive-style pax comment if given)."""
    pax = {"comment": pax_comment} if pax_comment else {}
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT, pax_headers=pax) as tar:
        for m in members:
            info = tarfile.TarInfo(m.name)
            info.type = m.kind
            info.mtime = m.mtime
            info.linkname = m.linkname
            if m.kind == tarfile.REGTYPE:
                info.size = len(m.data)
                tar.addfile(info, io.BytesIO(m.data))
            else:
                tar.addfile(info)
    return path


def tree_members(
    prefix: str, files: dict[str, bytes] | None = None, mtime: int = 0
) -> list[Member]:
    out = [Member(f"{prefix}/", kind=tarfile.DIRTYPE, mtime=mtime)] if prefix else []
    for rel, data in sorted((files or FAKE_FILES).items()):
        name = f"{prefix}/{rel}" if prefix else rel
        out.append(Member(name, data, mtime=mtime))
    return out


def pack_like_github(folder: Path, dest: Path, top: str, commit: str) -> Path:
    """``folder`` packed as GitHub packs an archive: every member below the single folder
    ``top``, in sorted order, modes and symbolic links kept, and a pax global header whose
    comment is ``commit`` (what ``git archive`` writes; ``pax_commit`` reads it). Dot-files of
    the folder's top (a fetched tree's metadata) are left out."""

    def rename(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mtime = 0
        return info

    pax = {"comment": commit} if commit else {}
    with tarfile.open(
        dest, "w:gz", format=tarfile.PAX_FORMAT, pax_headers=pax, compresslevel=1
    ) as tar:
        tar.add(folder, arcname=top, recursive=False, filter=rename)
        for entry in sorted(folder.iterdir()):
            if not entry.name.startswith("."):
                tar.add(entry, arcname=f"{top}/{entry.name}", filter=rename)
    return dest
