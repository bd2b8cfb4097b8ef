"""The two trees obtainable here: pinned, verified, and really the API generations we think."""

from __future__ import annotations

from pathlib import Path

from generator.releases import load_releases
from generator.sources.digest import tree_digest
from generator.sources.fetch import read_tree_metadata


def test_b11312_has_the_mtp_api(tree_b11312: Path) -> None:
    header = (tree_b11312 / "include/llama.h").read_text()
    assert "LLAMA_CONTEXT_TYPE_MTP" in header
    meta = read_tree_metadata(tree_b11312)
    assert meta["commit"] == "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
    assert meta["tag"] == "b11312"


def test_pre_mtp_tree_has_none_of_it(tree_63d93d1: Path) -> None:
    header = (tree_63d93d1 / "include/llama.h").read_text()
    for name in ("LLAMA_CONTEXT_TYPE_MTP", "n_rs_seq", "load_mtp", "llama_n_rs_seq"):
        assert name not in header
    assert read_tree_metadata(tree_63d93d1)["commit"].startswith("63d93d1")


def test_cached_trees_match_releases_toml(tree_b11312: Path, tree_63d93d1: Path) -> None:
    by_commit = {r.commit: r for r in load_releases()}
    for tree in (tree_b11312, tree_63d93d1):
        release = by_commit[tree.name]
        assert tree_digest(tree) == release.digest
        assert ("LLAMA_CONTEXT_TYPE_MTP" in (tree / "include/llama.h").read_text()) == release.mtp
