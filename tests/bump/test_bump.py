"""bump: nothing changes unless every gate passed; when they all pass, everything is recorded."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import tomlkit

from generator.bump.gates import FAILED, PASSED, GateOutcome, PlatformRun
from generator.bump.pipeline import BumpFailed, BumpHooks, BumpOptions, run_bump
from generator.errors import SourceError
from generator.native.build import BuildResult
from generator.native.cmake_driver import BuildError
from tests.bump.repos import fake_repo, snapshot
from tests.conftest import BuildFactory
from tests.repo import REPO_ROOT
from tests.sources.http_server import Routes, serve
from tests.trees import PIN


def test_failing_gate_leaves_repo_byte_identical(tmp_path: Path, tree_pin: Path) -> None:
    repo = fake_repo(tmp_path)
    before = snapshot(repo)
    log = tmp_path / "build.log"
    log.write_text("compiler said no\n")

    def failing_build(tree: Path, platform: str) -> BuildResult:
        raise BuildError(f"build {platform}: compile", log, "exit 1")

    with pytest.raises(BumpFailed) as info:
        run_bump(
            BumpOptions(PIN, repo, platforms=("linux-x86_64",)),
            BumpHooks(builder=failing_build),
        )
    message = str(info.value)
    assert "linux-x86_64: build failed" in message and str(log) in message
    assert snapshot(repo) == before


def test_unknown_tag_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No GitHub, and no PyPI sdist vendors the tag (pip is faked: offline)."""
    from generator.sources import providers
    from tests.sources.pypi import FakePip

    monkeypatch.setattr(providers, "pip_download", FakePip())
    repo = fake_repo(tmp_path)
    before = snapshot(repo)
    with pytest.raises(SourceError, match="no PyPI sdist of b999999999 found"):
        run_bump(BumpOptions("b999999999", repo, cache=tmp_path / "cache", github_base=None))
    assert snapshot(repo) == before


def test_no_provider_reachable_changes_nothing(tmp_path: Path) -> None:
    repo = fake_repo(tmp_path)
    with (repo / "releases.toml").open("a") as fh:
        fh.write(
            '\n[[release]]\nref = "b1"\ntag = "b1"\ncommit = "' + "1" * 40 + '"\n'
            'digest = "sha256:00"\ndigest_algorithm = "llama-bindgen-tree-v1"\nmtp = true\n'
        )
    before = snapshot(repo)
    with serve(Routes()) as github, serve(Routes()) as mirror:  # both answer 404
        with pytest.raises(SourceError, match="every provider failed") as info:
            run_bump(
                BumpOptions("b1", repo, cache=tmp_path / "cache", github_base=github, mirror=mirror)
            )
    assert "GitHub archive" in str(info.value) and "mirror" in str(info.value)
    assert snapshot(repo) == before


def test_failing_smoke_blocks_the_record(
    tmp_path: Path, tree_pin: Path, native_build: BuildFactory
) -> None:
    """Real build, symbols and layout gates pass; one failing gate keeps the pin where it was."""
    repo = fake_repo(tmp_path)
    before = snapshot(repo)

    def smoke_fails(run: PlatformRun) -> GateOutcome:
        return GateOutcome("smoke", FAILED, "outputs differ (stand-in)")

    with pytest.raises(BumpFailed, match="linux-x86_64: smoke failed"):
        run_bump(
            BumpOptions(PIN, repo, platforms=("linux-x86_64",)),
            BumpHooks(builder=native_build, smoke=smoke_fails),
        )
    assert snapshot(repo) == before


def test_all_gates_passing_records_everything(
    tmp_path: Path, tree_pin: Path, native_build: BuildFactory
) -> None:
    repo = fake_repo(tmp_path)
    # as before the first pin: no bindings, no pin, no record
    shutil.rmtree(repo / "generated" / "llama_bindings")
    doc = tomlkit.parse((repo / "releases.toml").read_text())
    doc["pinned"] = ""
    for entry in doc["release"]:  # type: ignore[union-attr]
        for key in ("gates", "notes"):
            entry.pop(key, None)
    (repo / "releases.toml").write_text(tomlkit.dumps(doc))

    report = run_bump(
        BumpOptions(PIN, repo, platforms=("linux-x86_64",)),
        BumpHooks(builder=native_build),
    )
    assert report.recorded
    gates = {o.gate: o.status for o in report.outcomes["linux-x86_64"]}
    assert gates == {"build": PASSED, "symbols": PASSED, "layout": PASSED, "smoke": PASSED}
    doc = tomlkit.parse((repo / "releases.toml").read_text()).unwrap()
    assert doc["pinned"] == PIN
    entry = next(e for e in doc["release"] if e["ref"] == PIN)
    assert entry["gates"]["linux-x86_64"] == gates
    assert (repo / entry["notes"]).read_text().startswith("First pin")
    changelog = (repo / "CHANGELOG.md").read_text()
    assert changelog.index(f"## llama.cpp {PIN} pinned") < changelog.index("## Unreleased")
    assert (repo / "generated" / "llama_bindings" / "abi_manifest.json").is_file()
    # the committed bindings are exactly what this bump writes
    assert snapshot(repo / "generated") == snapshot(REPO_ROOT / "generated")
    # bumping the current pin again re-records it: same report and changelog, no second entry
    recorded = snapshot(repo)
    again = run_bump(
        BumpOptions(PIN, repo, platforms=("linux-x86_64",)),
        BumpHooks(builder=native_build),
    )
    assert again.recorded and snapshot(repo) == recorded


def test_a_machine_that_gates_fewer_platforms_than_the_pin_records_nothing(
    tmp_path: Path, tree_pin: Path, native_build: BuildFactory
) -> None:
    """Without the cross compilers, a bump would pin a release gated on linux-x86_64 alone:
    refused, with the platforms left out in the table as not-run and what to install; naming
    the platforms explicitly is how a narrower pin is recorded."""
    repo = fake_repo(tmp_path)
    pinned = tomlkit.parse((repo / "releases.toml").read_text()).unwrap()
    entry = next(e for e in pinned["release"] if e["ref"] == pinned["pinned"])
    assert {"linux-aarch64", "windows-x86_64"} <= set(entry["gates"])
    before = snapshot(repo)

    def without_cross_compilers(requested: tuple[str, ...]) -> tuple[list[str], dict[str, str]]:
        return ["linux-x86_64"], {
            "linux-aarch64": "missing tools: aarch64-linux-gnu-gcc",
            "windows-x86_64": "missing tools: x86_64-w64-mingw32-gcc-posix",
            "macos-arm64": "no toolchain on linux-x86_64",
        }

    def smoke_passes(run: PlatformRun) -> GateOutcome:
        return GateOutcome("smoke", PASSED, "stand-in")

    hooks = BumpHooks(
        builder=native_build, smoke=smoke_passes, choose_platforms=without_cross_compilers
    )
    with pytest.raises(BumpFailed) as info:
        run_bump(BumpOptions(PIN, repo), hooks)
    message = str(info.value)
    assert (
        "linux-aarch64: not-run (missing tools: aarch64-linux-gnu-gcc; apt-get install" in message
    )
    assert "g++-aarch64-linux-gnu" in message and "qemu-user" in message
    assert "windows-x86_64: not-run" in message and "wine64" in message
    assert "macos-arm64" not in message  # not part of the pin before
    assert "--platform" in message
    assert snapshot(repo) == before
