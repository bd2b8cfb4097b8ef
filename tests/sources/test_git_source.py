"""``fetch --source CLONE``: the commit is read from the clone, never taken on trust."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from generator.errors import SourceError
from generator.releases import Release
from generator.sources.digest import tree_digest
from generator.sources.fetch import TREE_METADATA, fetch_tree
from tests.sources.archives import write_tree

OTHER = "1234567890abcdef1234567890abcdef12345678"


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-C", str(folder),
         *args],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A git clone holding the fake tree: two commits, the tag b7 on the first."""
    folder = write_tree(tmp_path / "llama.cpp")
    _git(folder, "init", "-q")
    _git(folder, "add", "-A")
    _git(folder, "commit", "-q", "-m", "one")
    _git(folder, "tag", "b7")
    (folder / "README.md").write_text("second\n")
    _git(folder, "add", "-A")
    _git(folder, "commit", "-q", "-m", "two")
    _git(folder, "tag", "b8")
    return folder


def test_tag_at_head_takes_the_clones_commit(clone: Path, tmp_path: Path) -> None:
    head = _git(clone, "rev-parse", "HEAD")
    result = fetch_tree("b8", tmp_path / "c", source=clone, github_base=None, releases=[])
    assert result.commit == head
    meta = json.loads((result.root / TREE_METADATA).read_text())
    assert meta["commit"] == head and "dirty" not in meta
    assert not (result.root / ".git").exists()


def test_full_commit_matching_head_is_taken(clone: Path, tmp_path: Path) -> None:
    head = _git(clone, "rev-parse", "HEAD")
    result = fetch_tree(head, tmp_path / "c", source=clone, github_base=None, releases=[])
    assert result.commit == head


def test_a_stated_commit_other_than_head_is_refused(clone: Path, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=f"states commit .*, expected {OTHER}"):
        fetch_tree(OTHER, tmp_path / "c", source=clone, github_base=None, releases=[])
    assert not (tmp_path / "c" / "trees" / OTHER).exists()


def test_a_pinned_release_at_another_commit_is_refused(clone: Path, tmp_path: Path) -> None:
    pinned = Release("b8", "b8", OTHER, tree_digest(clone), "llama-bindgen-tree-v1", True)
    with pytest.raises(SourceError, match="states commit"):
        fetch_tree("b8", tmp_path / "c", source=clone, github_base=None, releases=[pinned])


def test_a_tag_naming_another_commit_is_refused(clone: Path, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"tag b7 is commit .* git checkout b7"):
        fetch_tree("b7", tmp_path / "c", source=clone, github_base=None, releases=[])


def test_a_tag_the_clone_lacks_is_refused(clone: Path, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="has no tag b9"):
        fetch_tree("b9", tmp_path / "c", source=clone, github_base=None, releases=[])


def test_a_dirty_clone_is_refused_unless_asked(clone: Path, tmp_path: Path) -> None:
    (clone / "include" / "llama.h").write_text("/* changed */\n")
    (clone / "new.c").write_text("int x;\n")
    with pytest.raises(
        SourceError, match=r"uncommitted changes \(2 changed path\(s\).*--allow-dirty"
    ):
        fetch_tree("b8", tmp_path / "c", source=clone, github_base=None, releases=[])
    result = fetch_tree(
        "b8", tmp_path / "c", source=clone, github_base=None, releases=[], allow_dirty=True
    )
    meta = json.loads((result.root / TREE_METADATA).read_text())
    assert "include/llama.h" in meta["dirty"] and "new.c" in meta["dirty"]
    assert (result.root / "include" / "llama.h").read_text() == "/* changed */\n"


def test_a_plain_folder_inside_another_repository_is_not_a_clone(
    clone: Path, tmp_path: Path
) -> None:
    """A tree copied into some repository's subfolder must not take that repository's HEAD."""
    inner = write_tree(clone / "vendor" / "llama.cpp")
    with pytest.raises(SourceError, match="cannot tell the full commit"):
        fetch_tree("b8", tmp_path / "c", source=inner, github_base=None, releases=[])


def test_cli_dirty_clone_is_one_line_exit_two(clone: Path, tmp_path: Path) -> None:
    (clone / "README.md").write_text("changed\n")
    proc = subprocess.run(
        [sys.executable, "-m", "generator", "fetch", "b8", "--cache", str(tmp_path / "c"),
         "--no-github", "--source", str(clone)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "uncommitted changes" in proc.stderr and "Traceback" not in proc.stderr
