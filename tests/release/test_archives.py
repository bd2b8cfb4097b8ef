"""Archives are reproducible: same content, same bytes, whatever the files' times, owners, modes."""

from __future__ import annotations

import gzip
import os
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from generator.release.archives import collect, write_archive


def make_folder(root: Path, mtime: int, umask_mode: int) -> Path:
    d = root / "pkg"
    (d / "lib").mkdir(parents=True)
    (d / "include").mkdir()
    (d / "lib" / "libz.so").write_bytes(b"z" * 100)
    (d / "lib" / "liba.so").write_bytes(b"a" * 50)
    (d / "include" / "a.h").write_text("int a;\n")
    (d / "build-info.json").write_text("{}\n")
    os.symlink("liba.so", d / "lib" / "liba.so.1")
    for p in d.rglob("*"):
        if p.is_symlink():
            continue
        if p.is_file():
            p.chmod(umask_mode)
        os.utime(p, (mtime, mtime))
    (d / "lib" / "libz.so").chmod(0o775)
    return d


@pytest.mark.parametrize("ext", ["tar.gz", "zip"])
def test_two_runs_same_bytes(tmp_path: Path, ext: str) -> None:
    first = make_folder(tmp_path / "one", 1_700_000_000, 0o600)
    second = make_folder(tmp_path / "elsewhere" / "two", 1_600_000_000, 0o664)
    if ext == "zip":  # zip archives hold no links
        (first / "lib" / "liba.so.1").unlink()
        (second / "lib" / "liba.so.1").unlink()
    a = write_archive(tmp_path / f"a.{ext}", collect(first, "top"))
    b = write_archive(tmp_path / f"b.{ext}", collect(second, "top"))
    assert a.read_bytes() == b.read_bytes()


def test_tar_members_normalised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1234567")
    folder = make_folder(tmp_path, 1_700_000_000, 0o600)
    path = write_archive(tmp_path / "x.tar.gz", collect(folder, "top"))
    raw = path.read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    assert raw[4:8] == b"\0\0\0\0", "gzip header mtime must be 0"
    assert raw[3] & 0x08 == 0, "gzip header must carry no file name"
    with tarfile.open(path) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert names[0] == "top" and "top/lib/libz.so" in names
    for m in members:
        assert (m.uid, m.gid, m.uname, m.gname, m.mtime) == (0, 0, "", "", 1234567)
    modes = {m.name: m.mode for m in members}
    assert modes["top/lib"] == 0o755
    assert modes["top/lib/libz.so"] == 0o755
    assert modes["top/lib/liba.so"] == 0o644
    link = next(m for m in members if m.name == "top/lib/liba.so.1")
    assert link.issym() and link.linkname == "liba.so"
    with gzip.open(path) as gz, tarfile.open(fileobj=gz) as tar:
        member = tar.extractfile("top/lib/libz.so")
        assert member is not None and member.read() == b"z" * 100


def test_zip_members_normalised(tmp_path: Path) -> None:
    folder = make_folder(tmp_path, 1_700_000_000, 0o600)
    (folder / "lib" / "liba.so.1").unlink()
    path = write_archive(tmp_path / "x.zip", collect(folder, "top"))
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        assert zf.read("top/lib/liba.so") == b"a" * 50
    names = [i.filename for i in infos]
    assert names == sorted(names)
    for info in infos:
        assert info.date_time == (1980, 1, 1, 0, 0, 0)
        assert info.create_system == 3
    modes = {i.filename: stat.S_IMODE(i.external_attr >> 16) for i in infos}
    assert modes["top/lib/libz.so"] == 0o755 and modes["top/include/a.h"] == 0o644


def test_link_leaving_the_folder_is_refused(tmp_path: Path) -> None:
    folder = make_folder(tmp_path, 0, 0o644)
    os.symlink("../../../etc/passwd", folder / "lib" / "evil.so")
    from generator.release.errors import ReleaseRefusedError

    with pytest.raises(ReleaseRefusedError, match="leaves the archive"):
        write_archive(tmp_path / "x.tar.gz", collect(folder, "top"))
