"""Resolving a user's REF against releases.toml."""

from __future__ import annotations

import pytest

from generator.errors import UsageError
from generator.releases import Release, load_releases, resolve_ref

A = Release("b1", "b1", "abcdef0" + "1" * 33, "sha256:a", "v1", True)
B = Release("abcdef9", "", "abcdef9" + "2" * 33, "sha256:b", "v1", False)


def test_tag_full_and_abbreviated_commit() -> None:
    assert resolve_ref("b1", [A, B]).release is A
    assert resolve_ref(A.commit, [A, B]).release is A
    assert resolve_ref("abcdef0", [A, B]).release is A
    assert resolve_ref("ABCDEF9", [A, B]).release is B


def test_ambiguous_prefix_is_an_error() -> None:
    twins = [
        Release("x", "", "abcdef1" + "0" * 33, "sha256:x", "v1", False),
        Release("y", "", "abcdef1" + "3" * 33, "sha256:y", "v1", False),
    ]
    with pytest.raises(UsageError, match="ambiguous"):
        resolve_ref("abcdef1", twins)
    assert resolve_ref("abcdef10", twins).release is twins[0]


def test_unknown_names() -> None:
    tag = resolve_ref("b99999", [A])
    assert not tag.pinned and tag.tag == "b99999" and tag.commit == ""
    commit = resolve_ref("0123456789", [A])
    assert not commit.pinned and commit.commit == "0123456789"
    with pytest.raises(UsageError):
        resolve_ref("  ", [A])


def test_repository_releases_file_is_valid() -> None:
    releases = load_releases()
    refs = {r.ref for r in releases}
    assert {"b11312", "63d93d1", "b11549"} <= refs
    for r in releases:
        assert r.digest.startswith("sha256:")
        assert all(len(s.sha256) == 64 for s in r.sdists)
        if r.commit:
            assert len(r.commit) == 40, r.ref
        else:  # a tree whose source states no commit (a PyPI sdist): held by its digest alone
            assert r.sdists and r.extra.get("commit_note"), r.ref
