"""The linux-x86_64 Vulkan build: built here against newer Vulkan headers, kept apart from the
CPU build, and its backend finds Mesa's lavapipe (a Vulkan device that runs on the CPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from generator.native.build import BuildResult, build_dir_for, build_native
from generator.native.shared_source import stage_dir
from generator.native.vulkan import MIN_HEADER_VERSION, header_version
from generator.paths import default_cache_dir
from generator.sources.tree import Tree
from tests.repo import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

LAVAPIPE_ICD = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"


@pytest.fixture(scope="module")
def vulkan_build(tree_pin: Path) -> BuildResult:
    return build_native(tree_pin, "linux-x86_64", backend="vulkan")


def test_the_vulkan_build_is_its_own_platform_folder(vulkan_build: BuildResult) -> None:
    assert vulkan_build.platform_dir.name == "linux-x86_64-vulkan"
    info = json.loads((vulkan_build.platform_dir / "build-info.json").read_text())
    assert info["backend"] == "vulkan" and info["platform"] == "linux-x86_64"
    assert info["cmake_options"]["GGML_VULKAN"] == "ON"
    include = Path(info["cmake_options"]["Vulkan_INCLUDE_DIR"])
    assert (header_version(include) or 0) >= MIN_HEADER_VERSION
    assert "lib/libggml-vulkan.so" in {k.split(".so")[0] + ".so" for k in info["libraries"]}
    assert vulkan_build.mtp.supported


def test_the_vulkan_build_compiles_from_the_cpu_builds_folder(
    vulkan_build: BuildResult, tree_pin: Path
) -> None:
    """One stage folder per platform, whatever the backend: the sources the Vulkan build shares
    with the CPU build have the CPU build's paths, so ccache serves their objects to both."""
    tree = Tree.read(tree_pin)
    ninja = build_dir_for(tree, vulkan_build.platform, "vulkan") / "cmake" / "build.ninja"
    text = ninja.read_text(encoding="utf-8")
    source = stage_dir(default_cache_dir(), "linux-x86_64")
    assert f"{source / 'src' / 'llama.cpp'}" in text
    assert f"{source / 'ggml' / 'src' / 'ggml-vulkan'}" in text
    assert str(source.parent.with_name("linux-x86_64-vulkan")) not in text


def test_the_vulkan_backend_finds_lavapipe(vulkan_build: BuildResult) -> None:
    """Through the generated bindings: ggml lists a Vulkan device named after llvmpipe."""
    code = (
        "import sys; from llama_bindings import load\n"
        "libs = load(sys.argv[1])\n"
        "g = libs.ggml; ffi = libs.ffi\n"
        "g.ggml_backend_load_all_from_path(sys.argv[1].encode())\n"
        "for i in range(g.ggml_backend_dev_count()):\n"
        "    d = g.ggml_backend_dev_get(i)\n"
        "    print(ffi.string(g.ggml_backend_dev_name(d)).decode(), '|',\n"
        "          ffi.string(g.ggml_backend_dev_description(d)).decode())\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT / "generated"),
        "VK_ICD_FILENAMES": LAVAPIPE_ICD,  # only Mesa's software device
        "GGML_VK_VISIBLE_DEVICES": "0",  # ggml skips CPU-type Vulkan devices unless named
    }
    proc = subprocess.run(
        [sys.executable, "-c", code, str(vulkan_build.lib_dir)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    devices = dict(line.split(" | ", 1) for line in proc.stdout.splitlines() if " | " in line)
    vulkan = {name: what for name, what in devices.items() if name.startswith("Vulkan")}
    assert vulkan, f"no Vulkan device among {devices}"
    assert any("llvmpipe" in what for what in vulkan.values()), vulkan


def test_a_load_that_left_layers_on_the_cpu_fails_the_device_checks() -> None:
    from generator.smoke import offload_checks

    data = {"devices": [{"name": "Vulkan0", "description": "llvmpipe", "type": "gpu"}]}
    log = "load_tensors: offloaded 4/4 layers to GPU\nload_tensors: offloaded 0/3 layers to GPU\n"
    checks, device = offload_checks("vulkan", data, log + "load_tensors: Vulkan0 model buffer size")
    assert device == "Vulkan0: llvmpipe"
    failed = [c.name for c in checks if not c.ok]
    assert failed == ["every model loaded with all layers offloaded"]
    checks, _ = offload_checks("vulkan", {"devices": []}, "")
    assert not any(c.ok for c in checks)


def test_the_four_gates_pass_for_the_vulkan_build(
    vulkan_build: BuildResult, tree_pin: Path, tmp_path: Path
) -> None:
    """The CLI's gates of the Vulkan build; its smoke ran on the Vulkan device, lavapipe (the
    smoke's log kept with ``--logs``: one smoke on lavapipe proves both, where a second run of
    the same smoke cost 37 s warm and over a minute cold)."""
    record, logs = tmp_path / "gates.json", tmp_path / "logs"
    proc = subprocess.run(
        [sys.executable, "-m", "generator", "--repo", str(REPO_ROOT), "gates", "--tree",
         str(tree_pin), "--platform", "linux-x86_64", "--backend", "vulkan",
         "--json", str(record), "--logs", str(logs)],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(record.read_text())
    assert data["backend"] == "vulkan" and data["platform"] == "linux-x86_64"
    assert set(data["gates"].values()) == {"passed"}, data
    smoke = (logs / "linux-x86_64-vulkan" / "smoke.log").read_text(encoding="utf-8")
    lines = smoke.splitlines()
    assert lines[0] == "smoke linux-x86_64: passed", smoke
    ran = next(line for line in lines if line.strip().startswith("ran "))
    assert "Vulkan0" in ran and "llvmpipe" in ran, smoke
    offloaded = "  ok   every model loaded with all layers offloaded"
    assert any(line.startswith(offloaded) for line in lines), smoke
    # the wrapper's backend_sampling (on by default): llama.cpp took the draft sampler onto the
    # draft context's device, lavapipe, for every draft
    assert any(line.startswith("  note backend sampling on: ") for line in lines), smoke
