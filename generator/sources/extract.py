"""Safe extraction of source archives into a folder.

Every member passes our checks before anything is written: absolute paths, ``..``, device files,
fifos, oversized members, too many members or bytes, duplicate names, members below a symbolic
link, and links whose target, resolved through the links met so far in the archive (so chains of
links count), leaves the extraction root; hard links must name an earlier regular file. These
checks do not rely on the standard library: ``tarfile``'s ``data`` filter (whose fixes this
project's Python may predate, CVE-2025-4517) only runs as a second line. A refused archive raises
:class:`UnsafeArchiveError` naming the member and the reason, and leaves no destination folder
(one whose extraction fails midway is removed). The caller extracts into a private temporary
folder and renames it into place only after verification.
"""

from __future__ import annotations

import posixpath
import shutil
import tarfile
from pathlib import Path, PurePosixPath
from typing import Literal

from generator.errors import UnsafeArchiveError

MAX_MEMBER_BYTES = 256 * 1024 * 1024
MAX_TOTAL_BYTES = 4 * 1024 * 1024 * 1024
MAX_MEMBERS = 200_000  # a llama.cpp tree has about 2,000 files; an sdist a few thousand more
MAX_LINK_HOPS = 40  # as many symbolic links as one path may pass through (Linux: 40)
# The second line of defence only; tests set it to "fully_trusted" to prove the first suffices.
EXTRACT_FILTER: Literal["data", "fully_trusted"] = "data"


class _Tree:
    """What the archive has put where so far: regular files, folders and symbolic links."""

    def __init__(self) -> None:
        self.links: dict[str, str] = {}  # path -> link target, as written in the archive
        self.kinds: dict[str, str] = {}  # path -> "file", "dir", "symlink" or "hardlink"

    def _escape(self, member: str, why: str) -> UnsafeArchiveError:
        return UnsafeArchiveError(f"member {member!r}: {why}")

    def resolve(self, path: str, member: str) -> str:
        """``path`` (relative to the root) with every symbolic link met so far followed;
        refused when it leaves the root or passes through too many links."""
        pending = [p for p in path.split("/") if p not in ("", ".")]
        done: list[str] = []
        hops = 0
        while pending:
            part = pending.pop(0)
            if part == "..":
                if not done:
                    raise self._escape(member, f"{path!r} resolves outside the tree")
                done.pop()
                continue
            here = "/".join([*done, part])
            target = self.links.get(here)
            if target is None:
                done.append(part)
                continue
            hops += 1
            if hops > MAX_LINK_HOPS or target.startswith("/"):
                raise self._escape(member, f"{path!r} passes through link {here!r} -> {target!r}")
            pending = [p for p in target.split("/") if p not in ("", ".")] + pending
        return "/".join(done)

    def add(self, member: tarfile.TarInfo, rel: str) -> None:
        if rel in self.kinds:
            raise self._escape(member.name, "appears twice in the archive")
        parent = posixpath.dirname(rel)
        if parent and self.resolve(parent, member.name) != parent:
            raise self._escape(member.name, "lies below a symbolic link")
        if member.issym():
            self.resolve(posixpath.join(parent, member.linkname), member.name)
            self.links[rel] = member.linkname
            self.kinds[rel] = "symlink"
        elif member.islnk():
            if self.kinds.get(member.linkname) != "file":
                raise self._escape(
                    member.name, f"hard link to {member.linkname!r}, not an earlier regular file"
                )
            self.kinds[rel] = "hardlink"
        else:
            self.kinds[rel] = "dir" if member.isdir() else "file"


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


def archive_prefix(archive: Path, marker: str = "include/llama.h", subdir: str = "") -> str:
    """The folder inside ``archive`` that holds a llama.cpp tree (it contains ``marker``): the
    shortest such path, or with ``subdir`` (where an sdist is known to vendor it, such as
    ``thirdparty/llama.cpp``) the shortest one that ends with ``subdir``.

    Handles a GitHub archive (``llama.cpp-<ref>/``), a PyPI sdist
    (``<pkg>-<ver>/vendor/llama.cpp/``) and a tarball of a tree packed at its root.
    """
    best: str | None = None
    with tarfile.open(archive) as tar:
        for member in tar:
            name = posixpath.normpath(member.name)
            if name == marker or name.endswith("/" + marker):
                prefix = name[: -len(marker)].rstrip("/")
                if subdir and not (prefix == subdir or prefix.endswith("/" + subdir)):
                    continue
                if best is None or len(prefix) < len(best):
                    best = prefix
    if best is None:
        where = f" below {subdir}/" if subdir else ""
        raise UnsafeArchiveError(f"{archive.name}: no {marker}{where} inside: not a llama.cpp tree")
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
    max_members: int = MAX_MEMBERS,
) -> Path:
    """Extract the members of ``archive`` below ``prefix`` into the new folder ``dest``.

    All members are checked before the first one is written, so a refused archive writes nothing;
    an extraction that fails midway removes ``dest``.
    """
    total = 0
    selected: list[tarfile.TarInfo] = []
    tree = _Tree()
    created = False
    try:
        with tarfile.open(archive) as tar:
            count = 0
            for member in tar:
                count += 1
                if count > max_members:
                    raise UnsafeArchiveError(f"{archive.name}: more than {max_members} members")
                if member.type in (tarfile.XGLTYPE, tarfile.XHDTYPE):
                    continue
                _check_member(member, max_member_bytes)
                rel = _strip(member.name, prefix)
                if rel is None or rel == ".":
                    continue
                if member.islnk():
                    link_rel = _strip(member.linkname, prefix)
                    if not link_rel or link_rel == ".":
                        raise UnsafeArchiveError(
                            f"member {member.name!r}: hard link outside the tree"
                        )
                    member = member.replace(linkname=link_rel, deep=False)
                tree.add(member, rel)
                total += member.size
                if total > max_total_bytes:
                    raise UnsafeArchiveError(
                        f"{archive.name}: more than {max_total_bytes} bytes once extracted"
                    )
                selected.append(member.replace(name=rel, deep=False))
            dest.mkdir(parents=True, exist_ok=False)
            created = True
            for member in selected:
                tar.extract(member, dest, filter=EXTRACT_FILTER)
    except tarfile.FilterError as exc:
        _remove(dest, created)
        raise UnsafeArchiveError(f"{archive.name}: {exc}") from exc
    except (tarfile.TarError, EOFError, OSError) as exc:
        _remove(dest, created)
        raise UnsafeArchiveError(f"{archive.name}: unreadable archive: {exc}") from exc
    except BaseException:
        _remove(dest, created)
        raise
    return dest


def _remove(dest: Path, created: bool) -> None:
    """Remove what a failed extraction wrote (only a folder this call created)."""
    if created:
        shutil.rmtree(dest, ignore_errors=True)
