"""`latest` and `propose` against a loopback GitHub: one pull request per tag, an issue when a
gate failed, API errors in one line, and the token never shown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from generator.github_api import GitHubApiError
from generator.tracking import TrackingClient, is_newer, issue_title, pull_title
from tests.repo import REPO_ROOT
from tests.tracking.github_server import FakeTracker, serve

TOKEN = "tok-3b1f-never-shown"
UPSTREAM = "ggml-org/llama.cpp"
REPO = "someone/bindings"
NEW = "b99999"
NEW_SHA = "ab" * 20


def _state() -> FakeTracker:
    return FakeTracker(UPSTREAM, REPO, TOKEN, latest_tag=NEW, commits={NEW: NEW_SHA})


def _cli(*args: str, token: str = TOKEN) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_TOKEN"}
    if token:
        env["GITHUB_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "generator", "--repo", str(REPO_ROOT), *args],
        capture_output=True, text=True, env=env, check=False, timeout=120,
    )  # fmt: skip


def _gates(tmp_path: Path, smoke: str = "passed") -> Path:
    path = tmp_path / "gates.json"
    gates = [{"gate": g, "status": "passed", "detail": "", "log": ""} for g in ("build", "symbols")]
    gates.append({"gate": "smoke", "status": smoke, "detail": "greedy output differs", "log": ""})
    path.write_text(json.dumps({"linux-x86_64": gates}))
    return path


def test_build_tags_compare_by_number() -> None:
    assert is_newer("b11313", "b11312") is True
    assert is_newer("b11312", "b11312") is False
    assert is_newer("b999", "b11312") is False
    assert is_newer("v1.0", "b11312") is None


def test_latest_names_the_newer_tag_and_its_commit() -> None:
    state = _state()
    with serve(state) as url:
        proc = _cli("latest", "--api-url", url, "--json")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    pinned = record["pinned"]
    assert record == {"tag": NEW, "commit": NEW_SHA, "pinned": pinned, "newer": True}
    assert state.log == [
        f"GET /repos/{UPSTREAM}/releases/latest",
        f"GET /repos/{UPSTREAM}/commits/{NEW}",
    ]
    assert state.authorisations == [f"Bearer {TOKEN}"] * 2
    assert TOKEN not in proc.stdout + proc.stderr


def test_latest_equal_to_the_pin_is_not_new() -> None:
    state = _state()
    with serve(state) as url:
        pin = json.loads(_cli("latest", "--api-url", url, "--json").stdout)["pinned"]
        state.latest_tag, state.commits = pin, {pin: "cd" * 20}
        proc = _cli("latest", "--api-url", url)
        record = json.loads(_cli("latest", "--api-url", url, "--json").stdout)
    assert proc.returncode == 0 and "the pinned release" in proc.stdout
    assert record["newer"] is False


@pytest.mark.parametrize(
    ("setup", "said"),
    [
        ({"latest_tag": ""}, "releases/latest: HTTP 404"),
        ({"fail_with": 500}, "HTTP 500"),
        ({"rate_limited": True}, "rate limited"),
    ],
)
def test_api_errors_are_one_line_and_exit_2(setup: dict[str, object], said: str) -> None:
    state = _state()
    for key, value in setup.items():
        setattr(state, key, value)
    with serve(state) as url:
        proc = _cli("latest", "--api-url", url)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and lines[0].startswith("llama-bindgen latest:")
    assert TOKEN not in proc.stderr


def test_a_passing_bump_opens_one_pull_request_then_updates_it(tmp_path: Path) -> None:
    report = tmp_path / "api-diff.md"
    report.write_text("## Added\n- llama_new_thing (compatible)\n")
    state = _state()
    args = ("propose", NEW, "--github-repo", REPO, "--branch", f"track/{NEW}",
            "--report", str(report), "--gates", str(_gates(tmp_path)))  # fmt: skip
    with serve(state) as url:
        first = _cli(*args, "--api-url", url)
        report.write_text("## Added\n- llama_new_thing (compatible)\n- llama_other (compatible)\n")
        second = _cli(*args, "--api-url", url)
    assert first.returncode == 0 and "opened pull request #1" in first.stdout, first.stderr
    assert second.returncode == 0 and "updated pull request #1" in second.stdout, second.stderr
    assert list(state.pulls) == [1] and not state.issues
    pull = state.pulls[1]
    assert pull["title"] == pull_title(NEW) and pull["head"] == f"track/{NEW}"
    assert pull["base"] == "main"
    assert "llama_other" in pull["body"]  # the update replaced the description
    assert "| platform | build | smoke | symbols |" in pull["body"]
    assert "| linux-x86_64 | passed | passed | passed |" in pull["body"]
    assert TOKEN not in first.stdout + first.stderr + second.stdout + second.stderr


def test_a_failing_gate_opens_one_issue_then_updates_it(tmp_path: Path) -> None:
    gates = _gates(tmp_path, smoke="failed")
    state = _state()
    args = ("propose", NEW, "--github-repo", REPO, "--failed", "--gates", str(gates),
            "--logs-url", "https://example.invalid/run/1")  # fmt: skip
    with serve(state) as url:
        first = _cli(*args, "--api-url", url)
        second = _cli(*args, "--api-url", url)
    assert "opened issue #1" in first.stdout and "updated issue #1" in second.stdout, first.stderr
    assert not state.pulls and list(state.issues) == [1]
    issue = state.issues[1]
    assert issue["title"] == issue_title(NEW)
    assert "linux-x86_64: smoke failed: greedy output differs" in issue["body"]
    assert "https://example.invalid/run/1" in issue["body"]


def test_propose_needs_a_token(tmp_path: Path) -> None:
    proc = _cli("propose", NEW, "--github-repo", REPO, "--failed", "--gates", str(_gates(tmp_path)),
                token="")  # fmt: skip
    assert proc.returncode == 2 and "needs a token" in proc.stderr


def test_the_client_rejects_a_commit_that_is_not_a_sha() -> None:
    state = _state()
    state.commits[NEW] = "not-a-sha"
    with serve(state) as url, pytest.raises(GitHubApiError, match="40-digit"):
        TrackingClient("", url).latest(UPSTREAM)
