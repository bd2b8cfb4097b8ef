"""The GPU check's run step end to end here, on the CPU backend (the dry run): the kit made by
``prepare`` (wheels downloaded), installed offline into a fresh venv by ``tools/gpu-check``,
then build (reused from the cache after the first run), gates and smoke, and one report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from generator.gpu_check.kit import prepare_kit
from generator.gpu_check.report import DRY_RUN
from generator.gpu_check.unpack import unpack
from generator.paths import default_cache_dir
from generator.smoke import STRATEGY_RUNS
from generator.sources.tree import Tree
from tests.repo import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]


def test_the_dry_run_of_the_kit_passes_offline_and_reports_itself_as_a_dry_run(
    tree_pin: Path, tmp_path: Path
) -> None:
    kit = tmp_path / "kit"
    manifest = prepare_kit(Tree.read(tree_pin), kit)
    # the machine's llama-bindgen cache (its compiler cache and stage folders): the build is
    # this machine's own, taken from the cache where the suite compiled the same text before
    # (on the GPU machine the kit starts from an empty cache)
    env = {
        **os.environ, "GPU_CHECK_WORK": str(tmp_path / "work"), "PIP_NO_INDEX": "1",
        "LLAMA_BINDGEN_CACHE": str(default_cache_dir()),
    }  # fmt: skip
    proc = subprocess.run(
        [str(REPO_ROOT / "tools" / "gpu-check"), "--kit", str(kit), "--out",
         str(tmp_path / "out"), "--backend", "cpu", "--jobs", "2"],
        capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=5400,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    report = json.loads((tmp_path / "out" / "gpu-check.json").read_text())
    assert report["dry_run"] is True and report["what"] == DRY_RUN
    assert report["status"] == "passed" and report["reason"] == ""
    assert report["machine"]["installed"].startswith("venv + pip install --no-index")
    assert {g: r["status"] for g, r in report["gates"].items()} == dict.fromkeys(
        ("build", "symbols", "layout", "smoke"), "passed"
    )
    assert report["tree"]["digest"] == manifest["tree"]["digest"] != Tree.read(tree_pin).digest
    modes = {row["mode"] for row in report["smoke"]["rows"]}
    assert {name for name, _kinds, _draft in STRATEGY_RUNS} | {"off", "draft-mtp"} <= modes
    assert report["smoke"]["checks"] and all(c["ok"] for c in report["smoke"]["checks"])
    assert {"install", "tree", "build", "symbols", "layout", "smoke", "total"} <= set(
        report["timings_s"]
    )


def test_the_kit_wheels_unpack_for_a_python_without_venv(tmp_path: Path) -> None:
    """The fallback of tools/gpu-check: this Python's wheels unpacked, cffi and jinja2 import."""
    from generator.gpu_check.kit import download_wheels, requirements

    download_wheels(tmp_path / "wheels", requirements())
    names = unpack(tmp_path / "wheels", tmp_path / "site")
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    assert any(n.startswith("cffi-") and tag in n for n in names)
    assert not any(n.startswith("cffi-") and tag not in n for n in names)
    proc = subprocess.run(
        [sys.executable, "-S", "-c", "import cffi, jinja2, tomlkit; print(cffi.__file__)"],
        capture_output=True, text=True, env={"PYTHONPATH": str(tmp_path / "site")}, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and str(tmp_path / "site") in proc.stdout, proc.stderr
