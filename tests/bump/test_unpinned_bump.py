"""bump of a tag releases.toml does not know, through a mirror with GitHub's archive layout: the
commit is the one the archive states, the digest is computed and recorded, the API/ABI report
compares against the current pin, and the pin moves only when every gate passed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import tomlkit

from generator.bump.pipeline import BumpOptions, run_bump
from generator.errors import SourceError
from generator.paths import CACHE_ENV, default_cache_dir
from generator.sources.digest import tree_digest
from generator.sources.providers import UPSTREAM_REPO
from generator.sources.tree_metadata import TREE_METADATA
from tests.bump.repos import fake_repo, snapshot
from tests.sources.archives import pack_like_github, write_tree
from tests.sources.http_server import Routes, serve
from tests.trees import PIN

TAG = "b99999"  # made up: no upstream tag, not in releases.toml
COMMIT = "a11ed0f0c0ffee5eed0123456789abcdef012345"  # made up
OTHER_COMMIT = "badc0de0" * 5
ADDED = "llama_bindgen_test_added"
DECLARATION = (
    "GGML_BACKEND_API ggml_backend_reg_t ggml_backend_rpc_add_server(const char * endpoint);\n"
)


def derived_tree(tree_pin: Path, dest: Path) -> Path:
    """The pinned tree with one added function: declared (with a doc comment) beside
    ggml_backend_rpc_add_server in ggml/include/ggml-rpc.h, a header the bindings bind (library
    ggml_rpc), defined in ggml/src/ggml-rpc/ggml-rpc.cpp. Only the two sources that include that
    header compile again; an addition to llama.h would compile every llama.cpp source, the chat
    layer and the wrapper again (about 5 minutes cold) for the same check of the bump."""
    shutil.copytree(tree_pin, dest, symlinks=True, ignore=shutil.ignore_patterns(TREE_METADATA))
    header = dest / "ggml" / "include" / "ggml-rpc.h"
    text = header.read_text()
    assert text.count(DECLARATION) == 1
    added = (
        f"\n// a constant, added by llama-bindgen's tests\nGGML_BACKEND_API int32_t {ADDED}(void);"
    )
    header.write_text(text.replace(DECLARATION, DECLARATION + added + "\n", 1))
    with (dest / "ggml" / "src" / "ggml-rpc" / "ggml-rpc.cpp").open("a") as source:
        source.write(f"\nint32_t {ADDED}(void) {{\n    return 99999;\n}}\n")
    return dest


def small_archive(tmp_path: Path, top: str, commit: str) -> Path:
    """A GitHub-style archive of a small llama.cpp-shaped tree (no build needed)."""
    tree = write_tree(tmp_path / "upstream")
    return pack_like_github(tree, tmp_path / "small.tar.gz", top, commit)


def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of this test's own (fetches, builds, bump work), sharing the user's ccache."""
    cache = tmp_path / "cache"
    cache.mkdir()
    shared_ccache = default_cache_dir() / "ccache"
    if shared_ccache.is_dir():
        (cache / "ccache").symlink_to(shared_ccache)
    monkeypatch.setenv(CACHE_ENV, str(cache))
    return cache


@pytest.mark.slow
@pytest.mark.needs_tree
def test_unpinned_tag_from_a_mirror_is_bumped_end_to_end(
    tree_pin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = derived_tree(tree_pin, tmp_path / "upstream")
    digest = tree_digest(tree)
    # GitHub names the top folder of a tag's archive after the tag
    archive = pack_like_github(tree, tmp_path / f"{TAG}.tar.gz", f"llama.cpp-{TAG}", COMMIT)
    repo = fake_repo(tmp_path)
    cache = private_cache(tmp_path, monkeypatch)
    routes = Routes({f"/{UPSTREAM_REPO}/archive/refs/tags/{TAG}.tar.gz": archive.read_bytes()})
    with serve(routes) as mirror:
        report = run_bump(
            BumpOptions(TAG, repo, cache=cache, mirror=mirror, platforms=("linux-x86_64",))
        )
    assert report.recorded
    assert not report.fetched.pinned and report.fetched.provider.startswith("mirror (")
    assert (report.fetched.commit, report.fetched.digest) == (COMMIT, digest)

    text = (repo / "releases.toml").read_text()
    appended = f'\n\n[[release]]\nref = "{TAG}"\n'  # last, after a blank line
    assert text.rindex("[[release]]") == text.index(appended) + 2
    doc = tomlkit.parse(text).unwrap()
    assert doc["pinned"] == TAG
    entry = next(e for e in doc["release"] if e["ref"] == TAG)
    assert (entry["tag"], entry["commit"], entry["digest"]) == (TAG, COMMIT, digest)
    assert digest.startswith("sha256:") and entry["digest_algorithm"] == "llama-bindgen-tree-v1"
    assert entry["mtp"] is True
    gates = entry["gates"]
    assert gates["providers"] == [f"mirror ({mirror})"]
    assert gates["linux-x86_64"] == dict.fromkeys(("build", "symbols", "layout", "smoke"), "passed")
    assert gates["diff_summary"] == "0 breaking, 1 compatible"
    before = next(e for e in doc["release"] if e["ref"] == PIN)
    assert before["gates"]["linux-aarch64"]["build"] == "passed"  # the pin before: as it was

    notes = (repo / entry["notes"]).read_text()
    assert entry["notes"] == f"reports/api-diff-{TAG}.md"
    assert PIN in notes and COMMIT in notes
    row = next(line for line in notes.splitlines() if f"`{ADDED}`" in line)
    assert f"int32_t {ADDED}(void)" in row and row.rstrip().endswith("| compatible |")

    package = repo / "generated" / "llama_bindings"
    assert f"int32_t {ADDED}(void);" in (package / "cdef.h").read_text()
    assert f"def {ADDED}(self) -> int:" in (package / "api.pyi").read_text()
    assert COMMIT in (package / "_about.py").read_text()

    changelog = (repo / "CHANGELOG.md").read_text()
    assert changelog.index(f"## llama.cpp {TAG} pinned") < changelog.index(f"## llama.cpp {PIN}")
    assert COMMIT in changelog and digest in changelog
    assert f"API/ABI changes since {PIN}: 0 breaking, 1 compatible" in changelog


def test_a_mirror_whose_archive_states_another_commit_is_refused(tmp_path: Path) -> None:
    """Bumping a commit: the mirror's archive of it says (pax comment) it is another commit."""
    archive = small_archive(tmp_path, f"llama.cpp-{COMMIT}", OTHER_COMMIT)
    repo = fake_repo(tmp_path)
    before = snapshot(repo)
    cache = tmp_path / "cache"
    routes = Routes({f"/{UPSTREAM_REPO}/archive/{COMMIT}.tar.gz": archive.read_bytes()})
    with serve(routes) as mirror:
        with pytest.raises(SourceError, match="every provider failed") as info:
            run_bump(BumpOptions(COMMIT, repo, cache=cache, mirror=mirror))
    assert f"states commit {OTHER_COMMIT}, expected {COMMIT}" in str(info.value)
    assert routes.requests == [f"/{UPSTREAM_REPO}/archive/{COMMIT}.tar.gz"]
    assert snapshot(repo) == before
    assert not (cache / "trees").exists() or not any((cache / "trees").iterdir())


def test_a_mirror_archive_of_a_tag_that_states_no_commit_is_refused(tmp_path: Path) -> None:
    """A tag's archive without the pax comment: its commit cannot be told, so nothing is
    recorded (a tag is never recorded with a guessed commit)."""
    archive = small_archive(tmp_path, f"llama.cpp-{TAG}", "")
    repo = fake_repo(tmp_path)
    before = snapshot(repo)
    routes = Routes({f"/{UPSTREAM_REPO}/archive/refs/tags/{TAG}.tar.gz": archive.read_bytes()})
    with serve(routes) as mirror:
        with pytest.raises(SourceError, match="cannot tell the full commit"):
            run_bump(BumpOptions(TAG, repo, cache=tmp_path / "cache", mirror=mirror))
    assert snapshot(repo) == before


def test_an_unknown_tag_whose_archive_states_the_pinned_commit_is_held_to_its_digest(
    tmp_path: Path,
) -> None:
    """The archive says it is b11312's commit (a recorded release with a commit) but its content
    is not b11312's: refused by that entry's digest, not recorded under the new tag or over that
    entry."""
    repo = fake_repo(tmp_path)
    pinned = tomlkit.parse((repo / "releases.toml").read_text()).unwrap()
    b11312 = next(e for e in pinned["release"] if e["ref"] == "b11312")
    archive = small_archive(tmp_path, f"llama.cpp-{TAG}", b11312["commit"])
    before = snapshot(repo)
    routes = Routes({f"/{UPSTREAM_REPO}/archive/refs/tags/{TAG}.tar.gz": archive.read_bytes()})
    with serve(routes) as mirror:
        with pytest.raises(SourceError, match="content digest mismatch") as info:
            run_bump(BumpOptions(TAG, repo, cache=tmp_path / "cache", mirror=mirror))
    assert f"expected {b11312['digest']}" in str(info.value)
    assert snapshot(repo) == before
