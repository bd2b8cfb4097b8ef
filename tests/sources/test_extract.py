"""Safe extraction refuses every escape and writes nothing for a refused archive."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from generator.errors import UnsafeArchiveError
from generator.sources import extract
from generator.sources.extract import archive_prefix, safe_extract
from tests.sources.archives import FAKE_FILES, Member, make_tar, tree_members

SYM, LNK = tarfile.SYMTYPE, tarfile.LNKTYPE

EVIL: dict[str, list[Member]] = {
    "absolute": [Member("/etc/evil", b"x")],
    "dotdot": [Member("llama.cpp-x/../../evil", b"x")],
    "symlink-out": [Member("llama.cpp-x/include/l", kind=tarfile.SYMTYPE, linkname="../../../etc")],
    "symlink-abs": [Member("llama.cpp-x/include/l", kind=tarfile.SYMTYPE, linkname="/etc/passwd")],
    "hardlink-out": [Member("llama.cpp-x/h", kind=tarfile.LNKTYPE, linkname="../outside")],
    "device": [Member("llama.cpp-x/dev", kind=tarfile.CHRTYPE)],
    "fifo": [Member("llama.cpp-x/fifo", kind=tarfile.FIFOTYPE)],
    # every link on its own stays inside; followed through each other, esc is the parent folder
    "chained-links": [
        Member("llama.cpp-x/deep/deeper", kind=SYM, linkname=".."),
        Member("llama.cpp-x/s1", kind=SYM, linkname="deep/deeper"),
        Member("llama.cpp-x/esc", kind=SYM, linkname="s1/.."),
        Member("llama.cpp-x/esc/evil", b"x"),
    ],
    "below-a-link": [
        Member("llama.cpp-x/inc", kind=SYM, linkname="include"),
        Member("llama.cpp-x/inc/llama.h", b"replaced through the link"),
    ],
    "hardlink-to-outward-link": [
        Member("llama.cpp-x/up", kind=SYM, linkname="."),
        Member("llama.cpp-x/h", kind=LNK, linkname="llama.cpp-x/up"),
    ],
    "duplicate-member": [
        Member("llama.cpp-x/include/llama.h", kind=SYM, linkname="../CMakeLists.txt"),
    ],
    "link-loop": [
        Member("llama.cpp-x/a", kind=SYM, linkname="b"),
        Member("llama.cpp-x/b", kind=SYM, linkname="a"),
        Member("llama.cpp-x/c", kind=SYM, linkname="a/x"),
    ],
}


@pytest.mark.parametrize("case", sorted(EVIL))
def test_refuses_escaping_members(tmp_path: Path, case: str) -> None:
    archive = make_tar(tmp_path / "evil.tar.gz", tree_members("llama.cpp-x") + EVIL[case])
    dest = tmp_path / "out"
    with pytest.raises(UnsafeArchiveError):
        safe_extract(archive, dest, "llama.cpp-x")
    assert not dest.exists(), "a refused archive must write nothing"
    assert not (tmp_path / "evil").exists()


@pytest.mark.parametrize("case", sorted(EVIL))
def test_refuses_without_tarfile_filter(
    tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our checks alone refuse every case: the standard library's filter is only a second line."""
    monkeypatch.setattr(extract, "EXTRACT_FILTER", "fully_trusted")
    archive = make_tar(tmp_path / "evil.tar.gz", tree_members("llama.cpp-x") + EVIL[case])
    with pytest.raises(UnsafeArchiveError, match="member"):
        safe_extract(archive, tmp_path / "out", "llama.cpp-x")
    assert not (tmp_path / "out").exists()


def test_limits_members_and_total_size(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "a.tar.gz", [*tree_members("t"), Member("t/extra", b"x" * 600)])
    n = len(tree_members("t")) + 1
    with pytest.raises(UnsafeArchiveError, match=f"more than {n - 1} members"):
        safe_extract(archive, tmp_path / "out", "t", max_members=n - 1)
    assert not (tmp_path / "out").exists()
    with pytest.raises(UnsafeArchiveError, match="more than 512 bytes once extracted"):
        safe_extract(archive, tmp_path / "out", "t", max_total_bytes=512)
    assert not (tmp_path / "out").exists()
    assert safe_extract(archive, tmp_path / "out", "t", max_members=n).is_dir()


def test_failure_midway_removes_the_destination(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = make_tar(tmp_path / "a.tar.gz", tree_members("t"))
    real = tarfile.TarFile.extract
    calls = []

    def failing(
        self: tarfile.TarFile, member: tarfile.TarInfo, *args: object, **kw: object
    ) -> None:
        calls.append(member.name)
        if len(calls) == 2:
            raise OSError("disk full")
        real(self, member, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(tarfile.TarFile, "extract", failing)
    with pytest.raises(UnsafeArchiveError, match="disk full"):
        safe_extract(archive, tmp_path / "out", "t")
    assert len(calls) == 2 and not (tmp_path / "out").exists()


def test_hard_link_to_an_earlier_file_is_kept(tmp_path: Path) -> None:
    members = [
        *tree_members("t"),
        Member("t/include/same.h", kind=LNK, linkname="t/include/llama.h"),
    ]
    out = safe_extract(make_tar(tmp_path / "a.tar.gz", members), tmp_path / "out", "t")
    assert (out / "include/same.h").read_bytes() == FAKE_FILES["include/llama.h"]


def test_refuses_oversized_member(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "big.tar.gz", [*tree_members("t"), Member("t/big", b"x" * 2048)])
    with pytest.raises(UnsafeArchiveError, match="exceeds"):
        safe_extract(archive, tmp_path / "out", "t", max_member_bytes=1024)
    assert not (tmp_path / "out").exists()


def test_extracts_only_below_prefix_and_keeps_inner_links(tmp_path: Path) -> None:
    members = [
        Member("pkg-1.0/setup.py", b"outside the tree"),
        *tree_members("pkg-1.0/vendor/llama.cpp"),
        Member(
            "pkg-1.0/vendor/llama.cpp/include/alias.h", kind=tarfile.SYMTYPE, linkname="llama.h"
        ),
    ]
    archive = make_tar(tmp_path / "sdist.tar.gz", members)
    prefix = archive_prefix(archive)
    assert prefix == "pkg-1.0/vendor/llama.cpp"
    out = safe_extract(archive, tmp_path / "out", prefix)
    assert not (out / "setup.py").exists()
    for rel, data in FAKE_FILES.items():
        assert (out / rel).read_bytes() == data
    assert (out / "include/alias.h").is_symlink()
    assert (out / "include/alias.h").read_bytes() == FAKE_FILES["include/llama.h"]


def test_archive_without_llama_h_is_not_a_tree(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "x.tar.gz", [Member("x/README", b"hi")])
    with pytest.raises(UnsafeArchiveError, match=r"no include/llama\.h"):
        archive_prefix(archive)


def test_garbage_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"this is not gzip")
    with pytest.raises(UnsafeArchiveError, match="unreadable"):
        safe_extract(bad, tmp_path / "out")
