"""The CI release matrix: which platforms and backends GitHub Actions builds, and on which runner.

One job per (platform, backend). ``smoke`` says whether the job's binaries can run on its runner
without a GPU: CPU builds on a runner of the same OS and architecture. Cross-built Android
libraries and GPU builds (the hosted runners have no GPU) are built and tested, not smoke-run.
``setup`` is the shell command that installs a backend's SDK on that runner ("" when none is
needed); these commands are not exercised on this machine.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CiPlatform:
    name: str  # llama-bindgen platform name
    runner: str  # GitHub-hosted runner label
    backends: tuple[str, ...]
    runs_natively: bool  # the runner can execute this platform's CPU binaries


@dataclass(frozen=True)
class CiJob:
    platform: str
    backend: str
    runner: str
    smoke: bool
    setup: str

    @property
    def artifact(self) -> str:
        return f"native-{self.platform}-{self.backend}"


CI_PLATFORMS: tuple[CiPlatform, ...] = (
    CiPlatform("linux-x86_64", "ubuntu-24.04", ("cpu", "cuda", "vulkan"), True),
    CiPlatform("linux-aarch64", "ubuntu-24.04-arm", ("cpu", "vulkan"), True),
    CiPlatform("macos-arm64", "macos-14", ("cpu", "metal"), True),
    CiPlatform("macos-x86_64", "macos-13", ("cpu", "metal"), True),
    CiPlatform("windows-x86_64", "windows-2022", ("cpu", "cuda", "vulkan"), True),
    CiPlatform("windows-arm64", "windows-11-arm", ("cpu",), True),
    CiPlatform("android-arm64-v8a", "ubuntu-24.04", ("cpu", "vulkan"), False),
    CiPlatform("android-x86_64", "ubuntu-24.04", ("cpu", "vulkan"), False),
)

# Backend SDK installation, by (OS, backend). Android builds use the NDK the Ubuntu runners carry
# (ANDROID_NDK_LATEST_HOME) and need only the host's shader compiler for Vulkan.
_SETUP: dict[tuple[str, str], str] = {
    ("linux", "cuda"): "sudo apt-get update && sudo apt-get install -y nvidia-cuda-toolkit",
    ("linux", "vulkan"): "sudo apt-get update && sudo apt-get install -y libvulkan-dev glslc",
    ("android", "vulkan"): "sudo apt-get update && sudo apt-get install -y glslc",
    ("windows", "cuda"): "choco install -y cuda",
    ("windows", "vulkan"): "choco install -y vulkan-sdk",
}

# The GitHub-hosted runner that gathers, verifies and publishes.
PUBLISH_RUNNER = "ubuntu-24.04"
PYTHON_VERSION = "3.11"


def ci_jobs() -> list[CiJob]:
    jobs = []
    for plat in CI_PLATFORMS:
        os_name = plat.name.split("-", 1)[0]
        for backend in plat.backends:
            jobs.append(
                CiJob(
                    platform=plat.name,
                    backend=backend,
                    runner=plat.runner,
                    smoke=plat.runs_natively and backend == "cpu",
                    setup=_SETUP.get((os_name, backend), ""),
                )
            )
    return jobs


def runner_labels() -> list[str]:
    return sorted({p.runner for p in CI_PLATFORMS} | {PUBLISH_RUNNER})
