"""Fetching: provider order and fall-through, verification, the cache, and the real HTTP path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from generator.errors import DigestMismatchError, SourceError
from generator.releases import Release
from generator.sources.digest import tree_digest
from generator.sources.fetch import TREE_METADATA, fetch_tree, read_tree_metadata
from tests.sources.archives import FAKE_FILES, Member, make_tar, tree_members, write_tree
from tests.sources.http_server import Routes, serve

COMMIT = "1234567890abcdef1234567890abcdef12345678"
REPO = "/ggml-org/llama.cpp/archive"


@pytest.fixture
def fake_release(tmp_path: Path) -> Release:
    digest = tree_digest(write_tree(tmp_path / "reference"))
    return Release("b1", "b1", COMMIT, digest, "llama-bindgen-tree-v1", True)


def archive_bytes(tmp_path: Path, files: dict[str, bytes] | None = None, name: str = "a") -> bytes:
    path = make_tar(
        tmp_path / f"{name}.tar.gz", tree_members(f"llama.cpp-{COMMIT}", files), pax_comment=COMMIT
    )
    return path.read_bytes()


def no_trace_left(cache: Path) -> None:
    assert not (cache / "trees" / COMMIT).exists()
    assert list((cache / "tmp").iterdir()) == []


def test_real_http_path_and_cache_hit(tmp_path: Path, fake_release: Release) -> None:
    cache = tmp_path / "cache"
    routes = Routes(files={f"{REPO}/{COMMIT}.tar.gz": archive_bytes(tmp_path)})
    with serve(routes) as url:
        first = fetch_tree("b1", cache, github_base=url, releases=[fake_release])
        assert not first.from_cache and first.provider.startswith("GitHub archive")
        assert (first.root / "include/llama.h").read_bytes() == FAKE_FILES["include/llama.h"]
        assert read_tree_metadata(first.root)["digest"] == fake_release.digest
        second = fetch_tree("1234567", cache, github_base=url, releases=[fake_release])
    assert second.from_cache and second.root == first.root
    assert routes.requests == [f"{REPO}/{COMMIT}.tar.gz"], (
        "the cache hit must not touch the network"
    )


def test_falls_through_in_order(
    tmp_path: Path, fake_release: Release, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    github = Routes()  # 404 for everything
    mirror = Routes(files={f"{REPO}/{COMMIT}.tar.gz": archive_bytes(tmp_path)})
    with serve(github) as gh, serve(mirror) as mi:
        result = fetch_tree("b1", cache, github_base=gh, mirror=mi, releases=[fake_release])
    assert result.provider.startswith("mirror")
    err = capsys.readouterr().err
    assert "HTTP 404" in err
    assert err.index("trying GitHub") < err.index("trying mirror")
    assert len(github.requests) >= 1 and len(mirror.requests) == 1


def test_interrupted_download_is_never_used(tmp_path: Path, fake_release: Release) -> None:
    cache = tmp_path / "cache"
    body = archive_bytes(tmp_path)
    path = f"{REPO}/{COMMIT}.tar.gz"
    broken = Routes(files={path: body}, truncate={path})
    source = write_tree(tmp_path / "local")
    with serve(broken) as url:
        result = fetch_tree("b1", cache, github_base=url, source=source, releases=[fake_release])
    assert result.provider.startswith("local source")
    assert list(cache.rglob("*.part")) == []


@pytest.mark.parametrize("announced", [True, False])
def test_download_over_the_size_limit_is_refused(tmp_path: Path, announced: bool) -> None:
    from generator.errors import SourceError
    from generator.sources.download import download

    body = b"x" * 300_000
    routes = Routes(files={"/big": body}, unannounced=set() if announced else {"/big"})
    dest = tmp_path / "big.tar.gz"
    with serve(routes) as url:
        with pytest.raises(SourceError, match="limit" if announced else "refused"):
            download(f"{url}/big", dest, max_bytes=200_000)
        assert not dest.exists() and not list(tmp_path.glob("*.part"))
        assert download(f"{url}/big", dest, max_bytes=300_000).read_bytes() == body


def test_tampered_archive_is_refused_and_nothing_cached(
    tmp_path: Path, fake_release: Release
) -> None:
    cache = tmp_path / "cache"
    tampered = dict(FAKE_FILES)
    tampered["src/llama.cpp"] = b"int llama_answer(void) { return 666; }\n"
    source = make_tar(tmp_path / "t.tar.gz", tree_members("llama.cpp-b1", tampered))
    with pytest.raises(SourceError) as info:
        fetch_tree("b1", cache, github_base=None, source=source, releases=[fake_release])
    assert fake_release.digest in str(info.value) and tree_digest(tmp_path / "reference") in str(
        info.value
    )
    no_trace_left(cache)


def test_digest_mismatch_names_expected_and_actual(tmp_path: Path, fake_release: Release) -> None:
    from generator.releases import resolve_ref
    from generator.sources.fetch import _try_provider
    from generator.sources.providers import LocalProvider

    changed = dict(FAKE_FILES)
    changed["include/llama.h"] += b"// extra\n"
    source = write_tree(tmp_path / "changed", changed)
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(DigestMismatchError) as info:
        _try_provider(
            LocalProvider(source), resolve_ref("b1", [fake_release]), work, tmp_path / "trees"
        )
    assert info.value.expected == fake_release.digest
    assert info.value.actual == tree_digest(source)
    assert not (tmp_path / "trees").exists()


def test_an_unpinned_tag_whose_archive_states_a_pinned_commit_is_held_to_its_digest(
    tmp_path: Path, fake_release: Release
) -> None:
    """A mirror's archive of a tag releases.toml does not know says it is a pinned commit but
    has other content: refused, and the verified tree of that commit in the cache is kept."""
    cache = tmp_path / "cache"
    verified = fetch_tree("b1", cache, github_base=None, source=tmp_path / "reference",
                          releases=[fake_release])  # fmt: skip
    tampered = dict(FAKE_FILES)
    tampered["src/llama.cpp"] = b"int llama_answer(void) { return 666; }\n"
    archive = make_tar(tmp_path / "t.tar.gz", tree_members("llama.cpp-b2", tampered),
                       pax_comment=COMMIT)  # fmt: skip
    routes = Routes(files={f"{REPO}/refs/tags/b2.tar.gz": archive.read_bytes()})
    with serve(routes) as url:
        with pytest.raises(SourceError, match="content digest mismatch") as info:
            fetch_tree("b2", cache, github_base=None, mirror=url, releases=[fake_release])
    assert fake_release.digest in str(info.value)
    assert tree_digest(verified.root) == fake_release.digest
    assert read_tree_metadata(verified.root)["tag"] == "b1"


def test_an_unpinned_commit_that_is_a_pinned_one_is_recorded_as_that_release(
    tmp_path: Path, fake_release: Release
) -> None:
    """Matching content: the tree is the pinned release, whatever name it was asked by."""
    routes = Routes(files={f"{REPO}/refs/tags/b2.tar.gz": archive_bytes(tmp_path)})
    with serve(routes) as url:
        got = fetch_tree("b2", tmp_path / "cache", github_base=None, mirror=url,
                         releases=[fake_release])  # fmt: skip
    assert (got.ref, got.tag, got.commit, got.pinned) == ("b1", "b1", COMMIT, True)
    assert read_tree_metadata(got.root)["pinned"] == "true"


def test_escaping_archive_is_refused(tmp_path: Path, fake_release: Release) -> None:
    cache = tmp_path / "cache"
    members = [*tree_members("llama.cpp-b1"), Member("llama.cpp-b1/../../escaped", b"x")]
    source = make_tar(tmp_path / "evil.tar.gz", members)
    with pytest.raises(SourceError, match=r"'\.\.' in path"):
        fetch_tree("b1", cache, github_base=None, source=source, releases=[fake_release])
    no_trace_left(cache)
    assert not (tmp_path / "escaped").exists()


def test_folder_with_link_escape_is_refused(tmp_path: Path, fake_release: Release) -> None:
    source = write_tree(tmp_path / "src")
    (source / "src" / "leak").symlink_to(tmp_path)
    with pytest.raises(SourceError, match="link points outside the tree"):
        fetch_tree(
            "b1", tmp_path / "cache", github_base=None, source=source, releases=[fake_release]
        )


def test_all_providers_failing_lists_each_reason(tmp_path: Path, fake_release: Release) -> None:
    with serve(Routes()) as gh, serve(Routes()) as mi:
        with pytest.raises(SourceError) as info:
            fetch_tree(
                "b1",
                tmp_path / "cache",
                github_base=gh,
                mirror=mi,
                source=tmp_path / "missing",
                releases=[fake_release],
            )
    text = str(info.value)
    assert "GitHub archive" in text and "mirror" in text and "local source" in text
    assert text.count("; ") == 2 and "\n" not in text


def test_unpinned_tag_takes_commit_from_archive(tmp_path: Path) -> None:
    routes = Routes(files={f"{REPO}/refs/tags/b2.tar.gz": archive_bytes(tmp_path)})
    with serve(routes) as url:
        result = fetch_tree("b2", tmp_path / "cache", github_base=url, releases=[])
    assert result.commit == COMMIT and not result.pinned
    assert result.digest == tree_digest(tmp_path / "cache" / "trees" / COMMIT)
    assert (result.root / TREE_METADATA).is_file()


def test_cli_exit_code_two_when_every_provider_fails(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "generator",
            "fetch",
            "b1",
            "--cache",
            str(tmp_path / "c"),
            "--no-github",
            "--source",
            str(tmp_path / "nothing-here"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "every provider failed" in proc.stderr and "no such file or folder" in proc.stderr
