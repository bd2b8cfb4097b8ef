"""The CI release matrix, read from the platform registry (:mod:`generator.platforms`).

One job per platform and backend that ``llama-bindgen build`` builds (``builds_backend``). Each
job runs on the platform's runner: it installs what the platform needs there (``setup``),
builds, runs the platform's gates (``nox -s gates``) and records them. ``experimental`` (with
its reason) marks a job whose build path has never run where we can see it: it may fail without
failing the workflow. ``smoke_not_run`` says why the smoke gate cannot run on the runner (it is
then recorded ``not-run``, and the platform is not released). ``ungated_wheel``: the job also
packs its build's wheel (``llama-bindgen wheel``, marked not gated) as a workflow artifact, for
trying on a machine with the device; the release never publishes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from generator import PYTHON_FLOOR
from generator.platforms import PLATFORMS, builds_backend, gate_key

# The GitHub-hosted runner that runs the test suite, and gathers, verifies and publishes.
PUBLISH_RUNNER = "ubuntu-24.04"
PYTHON_VERSION = "{}.{}".format(*PYTHON_FLOOR)  # CI runs the oldest Python supported


@dataclass(frozen=True)
class CiJob:
    platform: str
    backend: str
    runner: str
    setup: str
    experimental: str  # why the job may fail without failing the workflow ("" it may not)
    smoke_not_run: str  # why the smoke cannot run on the runner ("" it can)
    ungated_wheel: bool = False  # the job packs its build's wheel as an artifact, not gated

    @property
    def key(self) -> str:
        """The build's folder and gate record key (``gate_key``)."""
        return gate_key(self.platform, self.backend)

    @property
    def artifact(self) -> str:
        return f"native-{self.platform}-{self.backend}"


def ci_jobs() -> list[CiJob]:
    jobs = []
    for name in sorted(PLATFORMS):
        plat = PLATFORMS[name]
        for backend in plat.backends:
            if not builds_backend(name, backend):
                continue
            ci = plat.ci[backend]
            jobs.append(
                CiJob(
                    name,
                    backend,
                    plat.ci_runner,
                    ci.setup,
                    ci.experimental,
                    ci.smoke_not_run,
                    ci.ungated_wheel,
                )
            )
    return jobs


def runner_labels() -> list[str]:
    return sorted({job.runner for job in ci_jobs()} | {PUBLISH_RUNNER})
