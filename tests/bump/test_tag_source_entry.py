"""What bump records in releases.toml for a tree with no known commit (a tag from a PyPI sdist):
``commit = ""`` with the note, and the sdist tag-sources.toml names, so the entry can be fetched
again and its builds and bindings carry the same "unknown (...)" label."""

from __future__ import annotations

from pathlib import Path

import tomlkit

from generator.bump.pipeline import _release_entry
from generator.paths import TAG_SOURCES
from generator.releases import load_document, load_releases
from generator.sources.fetch import FetchResult
from generator.sources.tag_sources import LICENSES_PRESENT, TagSource, render_tag_sources
from tests.bump.repos import fake_repo
from tests.sources.archives import write_tree

DIGEST = "sha256:" + "5e" * 32
# a tag releases.toml does not pin (an xllamacpp sdist, which states no commit)
PIN = TagSource("b10809", "xllamacpp", "2026.9.10809", "thirdparty/llama.cpp", "ab" * 32,
                DIGEST, "llama-bindgen-tree-v1", "",
                "the xllamacpp 2026.9.10809 sdist states no commit; none is recorded",
                LICENSES_PRESENT)  # fmt: skip


def test_an_unknown_commit_entry(tmp_path: Path) -> None:
    repo = fake_repo(tmp_path)
    (repo / TAG_SOURCES).write_text(render_tag_sources({PIN.tag: PIN}))
    tree = write_tree(tmp_path / "tree")
    fetched = FetchResult(tree, "b10809", "b10809", "", DIGEST,
                          "PyPI sdist xllamacpp==2026.9.10809", False, False)  # fmt: skip
    doc = load_document(repo / "releases.toml")
    ref, entry = _release_entry(doc, fetched, repo)
    assert ref == "b10809" and entry["commit"] == "" and entry["commit_note"] == PIN.commit_note
    (repo / "releases.toml").write_text(tomlkit.dumps(doc))
    release = next(r for r in load_releases(repo / "releases.toml") if r.ref == "b10809")
    assert release.sdists[0].requirement == "xllamacpp==2026.9.10809"
    assert release.sdists[0].subdir == "thirdparty/llama.cpp"
    assert release.commit_label == fetched.commit_label
    assert release.cache_key == fetched.cache_key
    again = load_document(repo / "releases.toml")
    assert _release_entry(again, fetched, repo)[0] == "b10809"
    assert len(again["release"]) == len(doc["release"])  # found by tag and digest, not added
