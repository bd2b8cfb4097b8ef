"""`llama-bindgen release <the pin>` over the real builds of every platform its pin records."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from generator.native.build import build_native
from generator.platforms import split_key
from generator.releases import Release, load_releases
from tests.conftest import BuildFactory
from tests.repo import REPO_ROOT
from tests.trees import PIN


def release_pinned(tree: Path, native_build: BuildFactory, base: Path) -> tuple[Path, list[str]]:
    """Build (or reuse) every recorded build of the pin, release them into
    ``base/dist``; returns that folder and the recorded gate keys."""
    recorded = sorted(k for k, v in pinned().extra["gates"].items() if isinstance(v, dict))
    assert recorded, f"{PIN} is pinned with gate records"
    native = base / "native"
    for key in recorded:
        platform, backend = split_key(key)
        build = (
            native_build(tree, platform)
            if backend == "cpu"
            else build_native(tree, platform, backend=backend)
        )
        shutil.copytree(build.platform_dir, native / key, symlinks=True)
    out = base / "dist"
    proc = subprocess.run(
        [sys.executable, "-m", "generator", "release", PIN, "--out", str(out),
         "--native", str(native)],
        cwd=REPO_ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out, recorded


def pinned() -> Release:
    return next(r for r in load_releases() if r.ref == PIN)
