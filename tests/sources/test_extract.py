"""Safe extraction refuses every escape and writes nothing for a refused archive."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from generator.errors import UnsafeArchiveError
from generator.sources.extract import archive_prefix, safe_extract
from tests.sources.archives import FAKE_FILES, Member, make_tar, tree_members

EVIL: dict[str, list[Member]] = {
    "absolute": [Member("/etc/evil", b"x")],
    "dotdot": [Member("llama.cpp-x/../../evil", b"x")],
    "symlink-out": [Member("llama.cpp-x/include/l", kind=tarfile.SYMTYPE, linkname="../../../etc")],
    "symlink-abs": [Member("llama.cpp-x/include/l", kind=tarfile.SYMTYPE, linkname="/etc/passwd")],
    "hardlink-out": [Member("llama.cpp-x/h", kind=tarfile.LNKTYPE, linkname="../outside")],
    "device": [Member("llama.cpp-x/dev", kind=tarfile.CHRTYPE)],
    "fifo": [Member("llama.cpp-x/fifo", kind=tarfile.FIFOTYPE)],
}


@pytest.mark.parametrize("case", sorted(EVIL))
def test_refuses_escaping_members(tmp_path: Path, case: str) -> None:
    archive = make_tar(tmp_path / "evil.tar.gz", tree_members("llama.cpp-x") + EVIL[case])
    dest = tmp_path / "out"
    with pytest.raises(UnsafeArchiveError):
        safe_extract(archive, dest, "llama.cpp-x")
    assert not dest.exists(), "a refused archive must write nothing"
    assert not (tmp_path / "evil").exists()


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
