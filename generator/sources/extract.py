"""Safe extraction of source archives into a folder.

Every member passes two checks before anything is written: our own (absolute paths, ``..``,
device files, fifos, oversized members, links that leave the extraction root), then the standard
library's ``tarfile.data_filter`` as a second line. A refused archive raises
:class:`UnsafeArchiveError` naming the member and the reason. The caller extracts into a private
temporary folder and renames it into place only after verification, so nothing half-written is
ever trusted.
"""

from __future__ import annotations

import posixpath
import tarfile
from pathlib import Path, PurePosixPath

from generator.errors import UnsafeArchiveError

MAX_MEMBER_BYTES = 256 * 1024 * 1024
MAX_TOTAL_BYTES = 4 * 1024 * 1024 * 1024


def _normalised(name: str) -> str:
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise UnsafeArchiveError(f"member {name!r}: absolute path")
    parts = PurePosixPath(name).parts
    if ".." in parts:
        raise UnsafeArchiveError(f"member {name!r}: '..' in path")
    return posixpath.normpath(name) if name else name


def _check_member(member: tarfile.TarInfo, max_member_bytes: int) -> None:
    name = _normalised(member.name)
    if member.ischr() or member.isblk() or member.isfifo() or member.isdev():
        raise UnsafeArchiveError(f"member {name!r}: device or fifo")
    if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
        raise UnsafeArchiveError(f"member {name!r}: unsupported member type {member.type!r}")
    if member.size > max_member_bytes:
        raise UnsafeArchiveError(
            f"member {name!r}: {member.size} bytes exceeds the limit of {max_member_bytes}"
        )
    if member.issym() or member.islnk():
        target = member.linkname
        if target.startswith("/"):
            raise UnsafeArchiveError(f"member {name!r}: link to absolute path {target!r}")
        base = posixpath.dirname(name) if member.issym() else ""
        resolved = posixpath.normpath(posixpath.join(base, target))
        if resolved == ".." or resolved.startswith("../"):
            raise UnsafeArchiveError(f"member {name!r}: link {target!r} points outside the tree")


def _strip(name: str, prefix: str) -> str | None:
    """The member's path below ``prefix`` ('' keeps it), or None when it lies elsewhere."""
    name = posixpath.normpath(name)
    if not prefix:
        return name
    if name == prefix:
        return "."
    if name.startswith(prefix + "/"):
        return name[len(prefix) + 1 :]
    return None


def archive_prefix(archive: Path, marker: str = "include/llama.h") -> str:
    """The folder inside ``archive`` that holds a llama.cpp tree (it contains ``marker``).

    Handles a GitHub archive (``llama.cpp-<ref>/``), a PyPI sdist
    (``<pkg>-<ver>/vendor/llama.cpp/``) and a tarball of a tree packed at its root.
    """
    best: str | None = None
    with tarfile.open(archive) as tar:
        for member in tar:
            name = posixpath.normpath(member.name)
            if name == marker or name.endswith("/" + marker):
                prefix = name[: -len(marker)].rstrip("/")
                if best is None or len(prefix) < len(best):
                    best = prefix
    if best is None:
        raise UnsafeArchiveError(f"{archive.name}: no {marker} inside: not a llama.cpp tree")
    return best


def pax_commit(archive: Path) -> str:
    """The commit that ``git archive`` records in the pax global header, or ''."""
    with tarfile.open(archive) as tar:
        tar.next()
        comment = tar.pax_headers.get("comment", "")
    comment = comment.strip().lower()
    return comment if len(comment) == 40 and all(c in "0123456789abcdef" for c in comment) else ""


def safe_extract(
    archive: Path,
    dest: Path,
    prefix: str = "",
    *,
    max_member_bytes: int = MAX_MEMBER_BYTES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
) -> Path:
    """Extract the members of ``archive`` below ``prefix`` into the new folder ``dest``.

    All members are checked before the first one is written, so a refused archive writes nothing.
    """
    total = 0
    selected: list[tarfile.TarInfo] = []
    try:
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
            for member in members:
                if member.type in (tarfile.XGLTYPE, tarfile.XHDTYPE):
                    continue
                _check_member(member, max_member_bytes)
                rel = _strip(member.name, prefix)
                if rel is None or rel == ".":
                    continue
                if member.issym() or member.islnk():
                    base = posixpath.dirname(rel) if member.issym() else ""
                    link_rel = member.linkname
                    if member.islnk():
                        link_rel = _strip(member.linkname, prefix) or ""
                        if not link_rel:
                            raise UnsafeArchiveError(
                                f"member {member.name!r}: hard link outside the tree"
                            )
                    resolved = posixpath.normpath(posixpath.join(base, link_rel))
                    if resolved == ".." or resolved.startswith("../"):
                        raise UnsafeArchiveError(
                            f"member {member.name!r}: link {member.linkname!r} points outside "
                            "the extracted tree"
                        )
                    if member.islnk():
                        member = member.replace(linkname=link_rel, deep=False)
                total += member.size
                if total > max_total_bytes:
                    raise UnsafeArchiveError(
                        f"{archive.name}: more than {max_total_bytes} bytes once extracted"
                    )
                selected.append(member.replace(name=rel, deep=False))
            dest.mkdir(parents=True, exist_ok=False)
            for member in selected:
                tar.extract(member, dest, filter="data")
    except tarfile.FilterError as exc:
        raise UnsafeArchiveError(f"{archive.name}: {exc}") from exc
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise UnsafeArchiveError(f"{archive.name}: unreadable archive: {exc}") from exc
    return dest
