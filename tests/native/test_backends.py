"""Backends: which builds are refused, how a GPU build is kept apart, Vulkan's headers."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest

from generator.errors import UsageError
from generator.native import build as native
from generator.native import vulkan
from generator.native.build import build_dir_for, build_native
from generator.native.cmake_driver import run_step
from generator.platforms import gate_key, get_platform
from generator.sources.tree import Tree


@pytest.mark.parametrize(
    ("platform", "backend", "said"),
    [
        ("linux-x86_64", "metal", "has no metal backend"),
        ("windows-x86_64", "vulkan", "not built by llama-bindgen yet.*MinGW"),
        ("linux-aarch64", "vulkan", "not built by llama-bindgen yet"),
        ("macos-x86_64", "metal", "not built by llama-bindgen yet.*Intel Macs"),
    ],
)
def test_a_backend_that_is_not_built_is_refused_before_anything_runs(
    platform: str, backend: str, said: str, tmp_path: Path
) -> None:
    with pytest.raises(UsageError, match=said):
        build_native(tmp_path / "no-tree", platform, backend=backend)


def test_a_cuda_build_without_nvcc_is_refused_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(native, "cuda_compiler", lambda: None)
    with pytest.raises(UsageError, match="linux-x86_64-cuda: a CUDA build needs nvcc"):
        build_native(tmp_path / "no-tree", "linux-x86_64", backend="cuda")


def test_a_cuda_toolkit_without_cublas_is_refused_with_that_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ggml-cuda links cuBLAS: a toolkit without it whose version PyPI's pinned cuBLAS does not
    match (this fake one has no cuda.h, so no version) is refused before configuring; with
    libcublas beside nvcc's toolkit it is accepted. (This machine's real toolkit, which has
    cuda.h, takes cuBLAS from PyPI: tests/native/test_cuda_pypi.py.)"""
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\n", encoding="utf-8")
    monkeypatch.setattr(native, "cuda_compiler", lambda: nvcc)
    monkeypatch.setattr(native, "CUDA_ROOTS", ())
    monkeypatch.setattr(native, "SYSTEM_LIBRARY_DIRS", [])
    assert "needs cuBLAS" in native.backend_missing_tools("cuda")
    with pytest.raises(UsageError, match="linux-x86_64-cuda: a CUDA build needs cuBLAS"):
        build_native(tmp_path / "no-tree", "linux-x86_64", backend="cuda")
    (tmp_path / "cuda" / "lib64" / "stubs").mkdir(parents=True)
    (tmp_path / "cuda" / "lib64" / "libcublas.so.13").write_bytes(b"")
    assert "NVIDIA's driver library" in native.backend_missing_tools("cuda")
    (tmp_path / "cuda" / "lib64" / "stubs" / "libcuda.so").write_bytes(b"")
    assert native.backend_missing_tools("cuda") == ""


def test_a_metal_build_needs_a_mac(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native.sys, "platform", "linux")
    with pytest.raises(UsageError, match="macos-arm64-metal: a Metal build needs macOS"):
        build_native(tmp_path / "no-tree", "macos-arm64", backend="metal")


def test_backend_options_say_what_the_build_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """ggml turns Metal on by default on macOS: a CPU build there turns it off; a CUDA build
    names the compiler it found."""
    mac, linux = get_platform("macos-arm64"), get_platform("linux-x86_64")
    assert native.backend_cmake_options(mac, "cpu") == {"GGML_METAL": "OFF"}
    assert native.backend_cmake_options(mac, "metal") == {
        "GGML_METAL": "ON", "GGML_METAL_EMBED_LIBRARY": "ON",
    }  # fmt: skip
    assert native.backend_cmake_options(linux, "cpu") == {}
    monkeypatch.setattr(native, "cuda_compiler", lambda: Path("/opt/cuda/bin/nvcc"))
    assert native.backend_cmake_options(linux, "cuda") == {
        "GGML_CUDA": "ON", "CMAKE_CUDA_COMPILER": "/opt/cuda/bin/nvcc",
    }  # fmt: skip


def test_a_gpu_build_has_its_own_folders(tmp_path: Path) -> None:
    plat = get_platform("linux-x86_64")
    tree = Tree(tmp_path, "b1", "b1", "a" * 40, "", "")
    assert gate_key(plat.name, "cpu") == "linux-x86_64"
    assert gate_key(plat.name, "vulkan") == "linux-x86_64-vulkan"
    assert build_dir_for(tree, plat, "vulkan") != build_dir_for(tree, plat)


def test_nested_ninja_steps_are_not_the_build_s_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = ["[1/40] a", "[1/2] sub", "[2/2] sub", "[20/40] b", "[40/40] c"]
    code = "import sys\nfor line in sys.argv[1:]: print(line)"
    run_step("build x", [sys.executable, "-c", code, *lines], tmp_path / "log", {})
    said = [ln for ln in capsys.readouterr().err.splitlines() if ": step " in ln]
    assert said == ["build x: step 1/40", "build x: step 20/40", "build x: step 40/40"]


HOST_SOURCES = """Types: deb
# a comment
URIs: http://mirror.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.invalid/debian-security
Suites: bookworm-security
Components: main
"""


def test_the_headers_come_from_the_host_s_own_mirror_with_the_suite_renamed() -> None:
    text = vulkan.suite_sources(HOST_SOURCES)
    assert text == (
        "Types: deb\nURIs: http://mirror.invalid/debian\nSuites: trixie\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    )


def test_sources_without_the_host_suite_are_refused() -> None:
    with pytest.raises(vulkan.VulkanSetupError, match="no bookworm entry"):
        vulkan.suite_sources("Types: deb\nURIs: http://mirror.invalid/x\nSuites: sid\n")


def test_header_version_is_read_from_vulkan_core(tmp_path: Path) -> None:
    (tmp_path / "vulkan").mkdir()
    (tmp_path / "vulkan" / "vulkan_core.h").write_text("#define VK_HEADER_VERSION 239\n")
    assert vulkan.header_version(tmp_path) == 239
    assert vulkan.header_version(tmp_path / "none") is None


def test_gate_keys_name_platform_and_backend() -> None:
    from generator.platforms import split_key

    assert split_key("linux-x86_64") == ("linux-x86_64", "cpu")
    assert split_key("linux-x86_64-vulkan") == ("linux-x86_64", "vulkan")
    assert split_key("android-arm64-v8a") == ("android-arm64-v8a", "cpu")


def test_bump_gates_the_vulkan_build_by_default_when_its_tools_are_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from generator.bump import pipeline, readiness
    from generator.native import vulkan as vulkan_module

    assert "linux-x86_64-vulkan" in readiness.default_keys()
    chosen, skipped = pipeline._buildable(())
    assert "linux-x86_64-vulkan" in chosen and chosen[0] == "linux-x86_64"
    monkeypatch.setattr(vulkan_module, "TOOLS", ("no-such-glslc",))
    chosen, skipped = pipeline._buildable(())
    assert "linux-x86_64-vulkan" not in chosen
    assert "no-such-glslc" in skipped["linux-x86_64-vulkan"]
    assert "llama-bindgen doctor" in skipped["linux-x86_64-vulkan"]


def test_bump_leaves_out_the_gpu_builds_this_machine_cannot_make_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from generator.bump import pipeline, readiness

    monkeypatch.setattr(native, "cuda_compiler", lambda: None)
    keys = readiness.default_keys()
    assert {"linux-x86_64-cuda", "macos-arm64-metal"} <= set(keys)
    chosen, skipped = pipeline._buildable(())
    assert "linux-x86_64-cuda" not in chosen and "needs nvcc" in skipped["linux-x86_64-cuda"]
    assert "macos-arm64-metal" not in chosen and skipped["macos-arm64-metal"]


def test_bump_leaves_out_a_gpu_build_whose_driver_is_missing_unless_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A CUDA build can be made here (cuBLAS from PyPI), but its smoke cannot run without
    NVIDIA's driver: a default bump leaves it out with that reason (it would record nothing);
    named, it is built and its smoke is not-run."""
    from generator.bump import pipeline, readiness
    from generator.smoke import devices

    monkeypatch.setattr(readiness, "backend_missing_tools", lambda backend: "")
    monkeypatch.setattr(devices, "_cuda_driver_missing", lambda: "no NVIDIA driver (test)")
    monkeypatch.setattr(readiness, "driver_missing_reason", devices.driver_missing_reason)
    chosen, skipped = pipeline._buildable(())
    assert "linux-x86_64-cuda" not in chosen
    assert "no NVIDIA driver (test)" in skipped["linux-x86_64-cuda"]
    chosen, _ = pipeline._buildable(("linux-x86_64-cuda",))
    assert chosen == ["linux-x86_64-cuda"]


def test_the_layout_gate_loads_a_driverless_cuda_build_with_its_link_folders(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without NVIDIA's driver the loader check of a CUDA build gets the folders it was linked
    against (toolkit runtime, PyPI's cuBLAS, the stub) on the library path; others get none."""
    from generator.bump import gates

    monkeypatch.setenv("LD_LIBRARY_PATH", "/already/there")
    missing = {"cuda": "no driver"}
    monkeypatch.setattr(gates, "driver_missing_reason", missing.get)
    monkeypatch.setattr(gates, "driverless_library_dirs", lambda backend: [tmp_path / "cublas"])
    run = gates.PlatformRun("linux-x86_64", cast(Any, None), cast(Any, None), tmp_path, tmp_path)
    cuda = gates._loading_env(replace(run, backend="cuda"))
    assert cuda["LD_LIBRARY_PATH"] == f"{tmp_path / 'cublas'}:/already/there"
    assert cuda["PYTHONPATH"] == str(tmp_path)
    assert gates._loading_env(run)["LD_LIBRARY_PATH"] == "/already/there"


def test_a_gpu_smoke_without_its_device_is_not_run_with_the_reason() -> None:
    from generator.smoke.devices import absent_device_reason

    cpu = {"name": "CPU", "description": "x86_64 CPU"}
    said = absent_device_reason("vulkan", [cpu])
    assert said is not None and "no Vulkan device here" in said and "CPU (x86_64 CPU)" in said
    lavapipe = {"name": "Vulkan0", "description": "llvmpipe (LLVM 15.0.6, 256 bits)"}
    assert absent_device_reason("vulkan", [cpu, lavapipe]) is None
    virtual = {"name": "MTL0", "description": "Apple Paravirtual device"}
    said = absent_device_reason("metal", [virtual])
    assert said is not None and "paravirtual GPU" in said
    assert absent_device_reason("metal", [{"name": "MTL0", "description": "Apple M2"}]) is None


def test_the_cuda_smoke_on_a_machine_without_nvidia_s_driver_is_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before any library is loaded (a CUDA build links libcuda, which only NVIDIA's driver
    brings): the smoke says not-run and why, and runs nothing."""
    from generator.smoke import NOT_RUN, devices, run_smoke

    monkeypatch.setattr(devices.ctypes.util, "find_library", lambda name: None)
    report = run_smoke(
        "linux-x86_64", tmp_path / "no-libs", tmp_path / "no-bindings", tmp_path / "work",
        backend="cuda",
    )  # fmt: skip
    assert report.status == NOT_RUN
    assert "no NVIDIA driver (libcuda)" in report.reason
    assert not (tmp_path / "work" / "driver-stderr.log").exists()
