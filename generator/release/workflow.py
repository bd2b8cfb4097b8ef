"""Render ``.github/workflows/release.yml`` from ``ci/release.yml.j2`` and the matrix."""

from __future__ import annotations

from pathlib import Path

from generator import __version__
from generator.paths import checkout_root
from generator.platforms import REFERENCE_PLATFORM, apt_packages_for
from generator.release.ci_matrix import PUBLISH_RUNNER, PYTHON_VERSION, ci_jobs
from generator.release.render import render

WORKFLOW_PATH = Path(".github/workflows/release.yml")
TRACK_WORKFLOW_NAME = "track-upstream.yml"  # emitted beside the release workflow
TRACK_CRON = "17 5 * * *"  # daily, off the hour
TRACK_TIMEOUT_MINUTES = 180
TESTS_HOST = REFERENCE_PLATFORM  # the platform of PUBLISH_RUNNER, where the test suite runs
# What the release job installs for the wheels: the aarch64 runtime libraries auditwheel grafts.
WHEEL_PACKAGES = ("libgomp1-arm64-cross",)


def default_workflow_path() -> Path:
    return checkout_root("the release workflow") / WORKFLOW_PATH


def render_workflow() -> str:
    return render(
        "ci/release.yml.j2",
        generator_version=__version__,
        jobs=ci_jobs(),
        publish_runner=PUBLISH_RUNNER,
        python_version=PYTHON_VERSION,
        test_packages=apt_packages_for(TESTS_HOST),
        wheel_packages=WHEEL_PACKAGES,
    )


def render_track_workflow() -> str:
    """The scheduled workflow that turns a new upstream tag into a pull request (or an issue)."""
    return render(
        "ci/track.yml.j2",
        generator_version=__version__,
        cron=TRACK_CRON,
        runner=PUBLISH_RUNNER,
        timeout_minutes=TRACK_TIMEOUT_MINUTES,
        python_version=PYTHON_VERSION,
        packages=apt_packages_for(TESTS_HOST),
    )
