"""The GPU check's pieces that need no GPU and no build: nvidia-smi's answer, the wheels a
Python can use, the report, the trimmed tree, the kit, and the stop where no NVIDIA driver is."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from generator.errors import UsageError
from generator.gpu_check import kit as kit_module
from generator.gpu_check.gpu import Gpu, cuda_arch, parse_gpus
from generator.gpu_check.report import DRY_RUN, GPU_CHECK, Report, overall_status
from generator.gpu_check.trim import DROPPED_BACKENDS, KEEP, write_trimmed_tree
from generator.gpu_check.unpack import usable
from generator.smoke import TEST_MODELS
from generator.sources.tree import Tree
from generator.sources.tree_metadata import load_tree_metadata
from tests.repo import REPO_ROOT

H100 = "NVIDIA H100 80GB HBM3, 9.0, 570.124.06, 81559 MiB\n"


def test_nvidia_smi_answer_gives_the_gpu_and_its_architecture() -> None:
    assert parse_gpus(H100) == [Gpu("NVIDIA H100 80GB HBM3", "9.0", "570.124.06", "81559 MiB")]
    assert parse_gpus(H100)[0].cuda_arch == "90"
    two = H100 + "NVIDIA GeForce RTX 5090, 12.0, 575.51.03, 32607 MiB\n"
    assert [g.cuda_arch for g in parse_gpus(two)] == ["90", "120"]
    assert cuda_arch("8.6") == "86"


@pytest.mark.parametrize(
    "text",
    ["NVIDIA H100, 9.0\n", "NVIDIA H100, [N/A], 570.1, 80 GiB\n", "NVIDIA H100, sm_90, 570, 80\n"],
)
def test_an_answer_that_is_not_a_gpu_line_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"nvidia-smi printed|not a compute capability"):
        parse_gpus(text)


@pytest.mark.parametrize(
    ("name", "version", "ok"),
    [
        ("cffi-2.1.1-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", (3, 12), True),
        ("cffi-2.1.1-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", (3, 11), False),
        ("cffi-2.1.1-cp312-cp312-manylinux2014_aarch64.whl", (3, 12), False),
        ("jinja2-3.1.6-py3-none-any.whl", (3, 13), True),
        ("altgraph-0.17.5-py2.py3-none-any.whl", (3, 11), True),
        ("not-a-wheel.whl", (3, 11), False),
    ],
)
def test_which_wheels_a_python_can_use(name: str, version: tuple[int, int], ok: bool) -> None:
    assert usable(name, version) is ok


def test_the_overall_status_is_passed_only_when_every_gate_passed() -> None:
    assert overall_status({"build": "passed", "smoke": "passed"}) == "passed"
    assert overall_status({"build": "passed", "smoke": "not-run"}) == "not-run"
    assert overall_status({"build": "failed", "smoke": "not-run"}) == "failed"
    assert overall_status({}) == "not-run"


def test_a_report_cut_off_mid_run_says_where_and_is_not_a_pass(tmp_path: Path) -> None:
    report = Report("cuda", tmp_path)
    report.stage("build")
    written = json.loads((tmp_path / "gpu-check.json").read_text())
    assert written["status"] == "not-run" and written["exit_code"] == 3
    assert written["reason"] == "did not finish: stopped during build"
    assert written["what"] == GPU_CHECK and written["dry_run"] is False
    report.finish("passed")
    assert json.loads((tmp_path / "gpu-check.json").read_text())["exit_code"] == 0
    dry = Report("cpu", tmp_path / "dry")
    dry.finish("passed")
    written = json.loads((tmp_path / "dry" / "gpu-check.json").read_text())
    assert written["dry_run"] is True and written["what"] == DRY_RUN
    assert set(written["timings_s"]) == {"total"}


def test_the_kit_carries_every_requirement_but_those_it_replaces() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    names = {d.split(">")[0].split("=")[0].split("[")[0] for d in project["dependencies"]}
    assert names == set(kit_module.CARRIED) | set(kit_module.NOT_CARRIED)


@pytest.mark.needs_tree
def test_the_trimmed_tree_keeps_the_commit_and_never_claims_the_pinned_digest(
    tree_pin: Path, tmp_path: Path
) -> None:
    tree = Tree.read(tree_pin)
    assert all((tree.root / entry).exists() for entry in KEEP)
    backends = {p.name for p in (tree.root / "ggml" / "src").glob("ggml-*")}
    assert set(DROPPED_BACKENDS) <= backends and {"ggml-cpu", "ggml-cuda"} <= backends
    meta = write_trimmed_tree(tree, tmp_path / "tree")
    trimmed = Tree.read(tmp_path / "tree")
    assert trimmed.commit == tree.commit and trimmed.digest != tree.digest
    assert load_tree_metadata(tmp_path / "tree") == meta
    assert meta["pinned"] == "false" and meta["trimmed_from"] == tree.digest
    assert meta["provider"].startswith("a trimmed copy")
    assert not (tmp_path / "tree" / "models").exists()
    assert not (tmp_path / "tree" / "ggml" / "src" / "ggml-vulkan").exists()
    assert (tmp_path / "tree" / "ggml" / "src" / "ggml-cuda" / "CMakeLists.txt").is_file()
    assert (tmp_path / "tree" / "tools" / "mtmd" / "test-1.jpeg").is_file()


@pytest.mark.needs_tree
def test_the_kit_holds_the_tree_the_models_and_its_manifest_under_its_limit(
    tree_pin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kit = tmp_path / "kit"
    manifest = kit_module.prepare_kit(Tree.read(tree_pin), kit, wheels=False)
    archive = (kit / "tree.tar.xz").read_bytes()
    assert sorted(p.name for p in kit.iterdir()) == ["kit.json", "models", "tree.tar.xz"]
    assert manifest["models"] == sorted(f"{m}.gguf" for m in TEST_MODELS)
    assert sorted(p.name for p in (kit / "models").iterdir()) == manifest["models"]
    assert kit_module.read_kit(kit)["tree"] == manifest["tree"]
    assert 0 < manifest["bytes"] <= kit_module.KIT_LIMIT_BYTES
    monkeypatch.setattr(kit_module, "KIT_LIMIT_BYTES", manifest["bytes"] - 1)
    with pytest.raises(UsageError, match="over its limit"):
        kit_module.prepare_kit(Tree.read(tree_pin), kit, wheels=False)
    assert (kit / "tree.tar.xz").read_bytes() == archive  # the same tree, the same archive


def _fake_tools(folder: Path, nvidia_smi: str | None) -> dict[str, str]:
    """An environment whose PATH has only ``nvidia-smi`` (a script printing its text, exit 9)."""
    folder.mkdir()
    if nvidia_smi is not None:
        script = folder / "nvidia-smi"
        script.write_text(f"#!/bin/sh\necho {shlex.quote(nvidia_smi)}\nexit 9\n")
        script.chmod(0o755)
    return {**os.environ, "PATH": str(folder), "PYTHONPATH": str(REPO_ROOT)}


@pytest.mark.parametrize(
    ("nvidia_smi", "reason"),
    [
        (None, "no nvidia-smi on PATH: no NVIDIA driver on this machine"),
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
         "nvidia-smi failed (exit 9): NVIDIA-SMI has failed because it couldn't communicate"),
    ],
)  # fmt: skip
def test_the_cuda_check_without_an_nvidia_driver_is_not_run_with_its_reason(
    nvidia_smi: str | None, reason: str, tmp_path: Path
) -> None:
    kit = tmp_path / "kit"
    kit.mkdir()
    (kit / "kit.json").write_text(json.dumps({"format": kit_module.KIT_FORMAT}))
    proc = subprocess.run(
        [sys.executable, "-m", "generator", "gpu-check", "run", "--kit", str(kit),
         "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=300,
        env=_fake_tools(tmp_path / "bin", nvidia_smi),
    )  # fmt: skip
    assert proc.returncode == 3, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "out" / "gpu-check.json").read_text())
    assert report["status"] == "not-run" and report["exit_code"] == 3
    assert report["reason"].startswith(reason)
    assert report["gates"] == {} and report["dry_run"] is False
    assert not (tmp_path / "work").exists()  # stopped before the tree and the build
