"""The content digest depends on content, not on packing."""

from __future__ import annotations

import os
from pathlib import Path

from generator.sources.digest import tree_digest
from generator.sources.extract import archive_prefix, safe_extract
from tests.sources.archives import FAKE_FILES, make_tar, tree_members, write_tree


def test_same_content_different_packing_same_digest(tmp_path: Path) -> None:
    a = make_tar(tmp_path / "a.tar.gz", tree_members("llama.cpp-b1", mtime=1))
    b = make_tar(
        tmp_path / "b.tar.gz", list(reversed(tree_members("p-1/vendor/llama.cpp", mtime=99)))
    )
    ta = safe_extract(a, tmp_path / "ta", archive_prefix(a))
    tb = safe_extract(b, tmp_path / "tb", archive_prefix(b))
    (tb / ".git").write_text("gitdir: elsewhere\n")  # VCS metadata differs between packers
    assert tree_digest(ta) == tree_digest(tb)


def test_one_changed_byte_changes_digest(tmp_path: Path) -> None:
    base = tree_digest(write_tree(tmp_path / "a"))
    changed = dict(FAKE_FILES)
    changed["src/llama.cpp"] = changed["src/llama.cpp"].replace(b"42", b"43")
    assert tree_digest(write_tree(tmp_path / "b", changed)) != base


def test_mode_and_rename_change_digest(tmp_path: Path) -> None:
    base = tree_digest(write_tree(tmp_path / "a"))
    t = write_tree(tmp_path / "b")
    os.chmod(t / "src/llama.cpp", 0o755)
    assert tree_digest(t) != base
    renamed = {("src/other.cpp" if k == "src/llama.cpp" else k): v for k, v in FAKE_FILES.items()}
    assert tree_digest(write_tree(tmp_path / "c", renamed)) != base


def test_files_outside_scope_do_not_count(tmp_path: Path) -> None:
    base = tree_digest(write_tree(tmp_path / "a"))
    t = write_tree(tmp_path / "b")
    (t / "docs").mkdir()
    (t / "docs/notes.md").write_text("packers may drop docs\n")
    assert tree_digest(t) == base
