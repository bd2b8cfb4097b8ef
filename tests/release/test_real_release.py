"""`llama-bindgen release <the pin>` from the repository's own pin: real builds, real bindings."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import BuildFactory
from tests.release.real_release import pinned, release_pinned

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]


def test_pinned_release_verifies_with_sha256sum(
    tree_pin: Path, native_build: BuildFactory, tmp_path: Path
) -> None:
    out, recorded = release_pinned(tree_pin, native_build, tmp_path)
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
    assert assets["commit"] == pinned().commit_label  # the commit, or "unknown (<source>)"
