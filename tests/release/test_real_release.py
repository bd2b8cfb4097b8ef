"""`llama-bindgen release b11312` from the repository's own pin: real builds, real bindings."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from generator.native.build import build_native
from generator.platforms import split_key
from generator.releases import load_releases
from tests.conftest import BuildFactory
from tests.repo import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]


def test_pinned_release_verifies_with_sha256sum(
    tree_b11312: Path, native_build: BuildFactory, tmp_path: Path
) -> None:
    pinned = next(r for r in load_releases() if r.ref == "b11312")
    recorded = sorted(k for k, v in pinned.extra["gates"].items() if isinstance(v, dict))
    assert recorded, "b11312 is pinned with gate records"
    native = tmp_path / "native"
    for key in recorded:
        platform, backend = split_key(key)
        build = (
            native_build(tree_b11312, platform)
            if backend == "cpu"
            else build_native(tree_b11312, platform, backend=backend)
        )
        shutil.copytree(build.platform_dir, native / key, symlinks=True)
    out = tmp_path / "dist"
    proc = subprocess.run(
        [sys.executable, "-m", "generator", "release", "b11312", "--out", str(out),
         "--native", str(native)],
        cwd=REPO_ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    check = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=out, capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assets = json.loads((out / "assets.json").read_text())
    natives = {
        f"{a['platform']}-{a['arch']}" + ("" if a["backend"] == "cpu" else f"-{a['backend']}")
        for a in assets["artifacts"]
        if a["kind"] == "native"
    }
    assert natives == set(recorded)
    assert assets["commit"] == pinned.commit
