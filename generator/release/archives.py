"""Reproducible archives: the same folder gives the same bytes, wherever and whenever it is packed.

Members are sorted; times are fixed (``SOURCE_DATE_EPOCH`` when set, else 0; zip's floor is
1980-01-01); owners are uid/gid 0 with empty names; modes are normalised to 0755 for folders and
executables and 0644 for other files. Dot-paths, ``__pycache__`` and ``*.pyc`` are left out. The
gzip header carries mtime 0 and no file name. Symbolic links are stored as links in tarballs when
they point inside the folder, and refused otherwise; zip archives (Windows) hold no links.
"""

from __future__ import annotations

import gzip
import os
import stat
import tarfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from generator.release.errors import ReleaseRefusedError

SOURCE_DATE_EPOCH_ENV = "SOURCE_DATE_EPOCH"
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
_SKIPPED = frozenset({"__pycache__"})  # with dot-paths and *.pyc: never part of a release


@dataclass(frozen=True)
class Member:
    """One file, folder or link to pack: ``source`` on disk, ``name`` inside the archive."""

    name: str  # POSIX path inside the archive, no leading slash
    source: Path


def fixed_mtime() -> int:
    value = os.environ.get(SOURCE_DATE_EPOCH_ENV, "")
    if not value:
        return 0
    if not value.isdigit():
        raise ReleaseRefusedError(f"{SOURCE_DATE_EPOCH_ENV}={value!r} is not a whole number")
    return int(value)


def collect(folder: Path, prefix: str, only: tuple[str, ...] | None = None) -> list[Member]:
    """``folder``'s content (or its top-level entries named in ``only``) under ``prefix/``."""
    tops = sorted(folder.iterdir()) if only is None else [folder / n for n in only]
    members = [Member(prefix, folder)]
    for top in tops:
        if not top.exists() and not top.is_symlink():
            continue
        paths = [top]
        if top.is_dir() and not top.is_symlink():
            paths += list(top.rglob("*"))
        for path in paths:
            rel = path.relative_to(folder)
            if any(part.startswith(".") or part in _SKIPPED for part in rel.parts):
                continue
            if path.suffix == ".pyc":
                continue
            members.append(Member(f"{prefix}/{rel.as_posix()}", path))
    return sorted(members, key=lambda m: m.name)


def _mode(path: Path) -> int:
    st = path.lstat()
    if stat.S_ISDIR(st.st_mode) or st.st_mode & stat.S_IXUSR:
        return 0o755
    return 0o644


def _link_target(member: Member, root_name: str) -> str:
    target = os.readlink(member.source)
    resolved = PurePosixPath(member.name).parent / target
    parts: list[str] = []
    for part in resolved.parts:
        if part == "..":
            if not parts:
                break
            parts.pop()
        elif part != ".":
            parts.append(part)
    if os.path.isabs(target) or not parts or parts[0] != root_name:
        raise ReleaseRefusedError(f"{member.source}: link to {target} leaves the archive")
    return target


def write_tar_gz(dest: Path, members: list[Member]) -> Path:
    mtime = fixed_mtime()
    root_name = PurePosixPath(members[0].name).parts[0] if members else ""
    with (
        dest.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for member in members:
            info = tarfile.TarInfo(member.name)
            info.mtime = mtime
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            src = member.source
            if src.is_symlink():
                info.type = tarfile.SYMTYPE
                info.linkname = _link_target(member, root_name)
                info.mode = 0o777
                tar.addfile(info)
            elif src.is_dir():
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
            elif src.is_file():
                info.size = src.stat().st_size
                info.mode = _mode(src)
                with src.open("rb") as fh:
                    tar.addfile(info, fh)
            else:
                raise ReleaseRefusedError(f"{src}: not a file, folder or link")
    return dest


def write_zip(dest: Path, members: list[Member]) -> Path:
    mtime = fixed_mtime()
    date_time = max(_ZIP_EPOCH, time.gmtime(mtime)[:6])
    with zipfile.ZipFile(dest, "w") as zf:
        for member in members:
            src = member.source
            if src.is_symlink():
                raise ReleaseRefusedError(f"{src}: zip archives hold no links")
            is_dir = src.is_dir()
            info = zipfile.ZipInfo(member.name + ("/" if is_dir else ""), date_time=date_time)
            info.create_system = 3  # Unix, so that external_attr carries the mode on every host
            if is_dir:
                info.external_attr = (stat.S_IFDIR | 0o755) << 16 | 0x10
                info.compress_type = zipfile.ZIP_STORED
                zf.writestr(info, b"")
            else:
                info.external_attr = (stat.S_IFREG | _mode(src)) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, src.read_bytes(), compresslevel=9)
    return dest


def write_archive(dest: Path, members: list[Member]) -> Path:
    """``.zip`` or ``.tar.gz`` by ``dest``'s name."""
    if dest.name.endswith(".zip"):
        return write_zip(dest, members)
    if dest.name.endswith(".tar.gz"):
        return write_tar_gz(dest, members)
    raise ReleaseRefusedError(f"{dest.name}: unknown archive type")
