"""`release --publish` against a loopback GitHub API: all or nothing, and the token stays secret."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.release.fixtures import PASSED, TAG, make_generated, make_native, write_releases
from tests.release.github_server import FakeGitHub, FakeRelease, serve
from tests.repo import REPO_ROOT

REPO = "example/llama-bindgen"
PLATFORMS = ("linux-x86_64", "windows-x86_64")


@pytest.fixture
def token() -> str:
    return "ghp_" + secrets.token_hex(16)


@pytest.fixture
def inputs(tmp_path: Path) -> list[str]:
    native = tmp_path / "native"
    for platform in PLATFORMS:
        make_native(native, platform)
    releases = write_releases(tmp_path / "releases.toml", dict.fromkeys(PLATFORMS, PASSED))
    generated = make_generated(tmp_path)
    return [
        "--native", str(native), "--generated", str(generated), "--releases", str(releases),
    ]  # fmt: skip


def publish(
    tmp_path: Path, inputs: list[str], api: str, token: str | None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_TOKEN"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    if token is not None:
        env["GITHUB_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "generator", "release", TAG, "--out", str(tmp_path / "dist"),
         *inputs, "--publish", "--github-repo", REPO, "--api-url", api],
        capture_output=True, text=True, env=env, check=False, timeout=120,
    )  # fmt: skip


def assert_token_secret(token: str, proc: subprocess.CompletedProcess[str], root: Path) -> None:
    assert token not in proc.stdout and token not in proc.stderr
    for path in root.rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), f"token written to {path}"


def test_publishes_every_asset(tmp_path: Path, inputs: list[str], token: str) -> None:
    state = FakeGitHub(REPO, token)
    with serve(state) as api:
        proc = publish(tmp_path, inputs, api, token)
    assert proc.returncode == 0, proc.stderr
    assert state.bad_auth == 0
    (rel,) = state.releases.values()
    assert rel.tag == TAG and not rel.draft
    dist = tmp_path / "dist"
    assert rel.assets == {p.name: p.read_bytes() for p in dist.iterdir()}
    assert "SHA256SUMS" in rel.assets and len(rel.assets) == len(PLATFORMS) + 4
    assert rel.body == (dist / "RELEASE_NOTES.md").read_text()
    assert proc.stdout.splitlines()[-1].endswith(f"/releases/tag/{TAG}")
    assert_token_secret(token, proc, tmp_path)


@pytest.mark.parametrize("failure", ["upload", "patch"])
def test_failure_leaves_no_release(
    tmp_path: Path, inputs: list[str], token: str, failure: str
) -> None:
    state = FakeGitHub(REPO, token)
    if failure == "upload":
        state.fail_uploads.add(f"llama-bindgen-windows-x86_64-cpu-{TAG}.zip")
    else:
        state.fail_patch = True
    with serve(state) as api:
        proc = publish(tmp_path, inputs, api, token)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "draft release was deleted" in proc.stderr
    assert state.releases == {}, "a failed publish must leave no release, draft or not"
    created = [e for e in state.log if e == f"POST /repos/{REPO}/releases"]
    deleted = [e for e in state.log if e.startswith(f"DELETE /repos/{REPO}/releases/")]
    assert len(created) == 1 and len(deleted) == 1
    if failure == "upload":
        assert any(e.startswith(f"POST /uploads/repos/{REPO}/") for e in state.log)
    assert_token_secret(token, proc, tmp_path)


def test_existing_release_is_not_replaced(tmp_path: Path, inputs: list[str], token: str) -> None:
    state = FakeGitHub(REPO, token)
    state.releases[1] = FakeRelease(1, TAG, TAG, "old", draft=False, assets={"x": b"old"})
    with serve(state) as api:
        proc = publish(tmp_path, inputs, api, token)
    assert proc.returncode == 4
    assert "already has a release" in proc.stderr
    assert list(state.releases) == [1] and state.releases[1].assets == {"x": b"old"}
    assert not any(e.startswith("POST") for e in state.log)


def test_bad_token_is_reported_without_echo(tmp_path: Path, inputs: list[str], token: str) -> None:
    state = FakeGitHub(REPO, "the-right-one")
    with serve(state) as api:
        proc = publish(tmp_path, inputs, api, token)
    assert proc.returncode == 4 and "HTTP 401" in proc.stderr
    assert state.releases == {}
    assert_token_secret(token, proc, tmp_path)


def test_missing_token_fails_before_packing(tmp_path: Path, inputs: list[str]) -> None:
    proc = publish(tmp_path, inputs, "http://127.0.0.1:9", None)
    assert proc.returncode == 2 and "GITHUB_TOKEN" in proc.stderr
    assert not (tmp_path / "dist").exists()


def test_a_lost_answer_to_publishing_keeps_the_published_release(
    tmp_path: Path, inputs: list[str], token: str
) -> None:
    """The draft was published but the answer never came: re-read, keep it, report success."""
    state = FakeGitHub(REPO, token, lose_patch_answer=True)
    with serve(state) as api:
        proc = publish(tmp_path, inputs, api, token)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (rel,) = state.releases.values()
    assert not rel.draft and rel.assets.keys() == {p.name for p in (tmp_path / "dist").iterdir()}
    assert not any(e.startswith("DELETE") for e in state.log)
    assert f"GET /repos/{REPO}/releases/{rel.id}" in state.log
    assert "answer to publishing was lost" in proc.stderr
    assert_token_secret(token, proc, tmp_path)


def test_a_draft_left_by_an_earlier_attempt_is_found_and_replaced(
    tmp_path: Path, inputs: list[str], token: str
) -> None:
    state = FakeGitHub(REPO, token)
    state.releases[1] = FakeRelease(1, TAG, TAG, "half", draft=True, assets={"x": b"partial"})
    state.releases[2] = FakeRelease(2, "b1", "b1", "other tag", draft=True)
    with serve(state) as api:
        proc = publish(tmp_path, inputs, api, token)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert 1 not in state.releases, "the stale draft for the tag is still there"
    assert 2 in state.releases, "a draft for another tag must be left alone"
    (rel,) = [r for r in state.releases.values() if r.tag == TAG]
    assert not rel.draft and "x" not in rel.assets
    assert "left by an earlier attempt" in proc.stderr
