"""The release's wheels: `llama-bindgen release <the pin>` from the real builds, then each wheel
installed where this machine can run it (linux-x86_64 CPU in a fresh virtual environment, the
Vulkan wheel on lavapipe, linux-aarch64 into Debian's arm64 Python under qemu) and smoke-run from
the installed copy; the Windows wheel's tags, contents and DLL imports checked (no Windows Python
can be had here)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from generator.release.wheels import (
    WheelNotMadeError,
    check_windows_wheel,
    distribution_name,
    wheel_version,
)
from generator.smoke import PASSED, SmokeReport, run_smoke
from tests.conftest import BuildFactory
from tests.release.real_release import release_pinned
from tests.release.venvs import pip_install, venv
from tests.trees import PIN

WHEEL_KEYS = ("linux-aarch64", "linux-x86_64", "linux-x86_64-vulkan", "windows-x86_64")


def test_wheel_versions_sort_by_tag() -> None:
    tags = ["b9246", "b10568", "b11312", "b11549"]
    versions = [Version(wheel_version(t)) for t in tags]
    assert versions == sorted(versions)
    assert wheel_version("b11312").startswith("11312.")
    with pytest.raises(WheelNotMadeError, match="not an upstream b<N> tag"):
        wheel_version("63d93d1")


def test_backend_in_the_distribution_name() -> None:
    assert distribution_name("cpu") == "llama-bindings"
    assert distribution_name("vulkan") == "llama-bindings-vulkan"


@pytest.fixture(scope="module")
def release_dir(
    tree_pin: Path, native_build: BuildFactory, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """`llama-bindgen release <the pin>` over every recorded build (built or reused)."""
    out, _recorded = release_pinned(tree_pin, native_build, tmp_path_factory.mktemp("wheels"))
    return out


def _wheels(out: Path) -> dict[str, str]:
    """``<platform>-<arch>[-backend]`` -> wheel file name, from assets.json."""
    assets = json.loads((out / "assets.json").read_text())
    return {
        f"{a['platform']}-{a['arch']}" + ("" if a["backend"] == "cpu" else f"-{a['backend']}"): a[
            "file"
        ]
        for a in assets["artifacts"]
        if a["kind"] == "wheel"
    }


@pytest.mark.slow
@pytest.mark.needs_tree
def test_release_lists_its_wheels(release_dir: Path) -> None:
    wheels = _wheels(release_dir)
    assert sorted(wheels) == sorted(WHEEL_KEYS)
    tags = {key: name.removesuffix(".whl").split("-", 2)[2] for key, name in wheels.items()}
    assert all(name.split("-")[1].startswith(PIN[1:] + ".") for name in wheels.values()), wheels
    assert tags["linux-x86_64"].startswith("cp311-abi3-manylinux_"), tags
    assert tags["linux-x86_64"].endswith("_x86_64")
    assert wheels["linux-x86_64-vulkan"].startswith(f"llama_bindings_vulkan-{PIN[1:]}.")
    assert "-manylinux_" in tags["linux-aarch64"] and tags["linux-aarch64"].endswith("_aarch64")
    assert tags["windows-x86_64"] == "py3-none-win_amd64"
    sums = (release_dir / "SHA256SUMS").read_text()
    notes = (release_dir / "RELEASE_NOTES.md").read_text()
    for name in wheels.values():
        assert f"  {name}\n" in sums
        assert f"`{name}`" in notes


def _installed_copy(python: Path, cwd: Path) -> dict[str, str]:
    script = (
        "import json, llama_bindings\n"
        "from llama_bindings.runtime import Model, Context\n"
        "libs = llama_bindings.load()\n"
        "print(json.dumps({'package': llama_bindings.__file__, 'lib_dir': str(libs.lib_dir),"
        " 'mode': libs.mode}))\n"
    )
    proc = subprocess.run(
        [str(python), "-c", script], cwd=cwd, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    data: dict[str, str] = json.loads(proc.stdout.strip().splitlines()[-1])
    return data


@pytest.mark.slow
@pytest.mark.needs_tree
def test_cpu_wheel_installs_offline_and_runs_the_smoke(release_dir: Path, tmp_path: Path) -> None:
    python = venv(tmp_path / "venv")
    said = pip_install(python, release_dir, "llama-bindings")
    assert _wheels(release_dir)["linux-x86_64"] in said  # pip picked this machine's wheel
    empty = tmp_path / "empty"
    empty.mkdir()
    found = _installed_copy(python, empty)
    assert found["package"].startswith(str(tmp_path / "venv")), found
    assert found["lib_dir"] == str(Path(found["package"]).parent / "lib")
    assert found["mode"] == "api"
    report = run_smoke("linux-x86_64", None, empty, tmp_path / "smoke", python=[str(python)])
    assert report.status == PASSED, report.table()
    names = {c.name for c in report.checks}
    assert "agree: MTP output identical to plain greedy" in names
    assert "ngram-simple: output identical to plain greedy" in names
    _ran_media(report)


def _ran_media(report: SmokeReport) -> None:
    """The smoke's media part ran from the installed wheel: its libmtmd loaded and generated
    after an image, with draft-mtp too."""
    names = {c.name for c in report.checks if c.ok}
    assert "media: MTP output identical to plain greedy" in names, report.table()


@pytest.mark.slow
@pytest.mark.needs_tree
def test_installed_wheel_still_runs_the_abi_guard(release_dir: Path, tmp_path: Path) -> None:
    python = venv(tmp_path / "venv")
    pip_install(python, release_dir, "llama-bindings")
    found = _installed_copy(python, tmp_path)
    mtp = Path(found["lib_dir"]) / "libllama_mtp.so"
    mtp.write_bytes(mtp.read_bytes() + b"\0")  # no longer the file the wheel's record lists
    script = (
        "import llama_bindings\n"
        "try:\n    llama_bindings.load()\n"
        "except llama_bindings.abi_guard.ForeignLibraryError as exc:\n    print('refused', exc)\n"
    )
    proc = subprocess.run(
        [str(python), "-c", script], cwd=tmp_path, capture_output=True, text=True, check=False,
        env={"LLAMA_BINDGEN_VERIFIED_CACHE": "off", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.stdout.startswith("refused"), proc.stdout + proc.stderr


@pytest.mark.slow
@pytest.mark.needs_tree
def test_vulkan_wheel_runs_the_smoke_on_lavapipe(release_dir: Path, tmp_path: Path) -> None:
    python = venv(tmp_path / "venv")
    said = pip_install(python, release_dir, "llama-bindings-vulkan")
    assert _wheels(release_dir)["linux-x86_64-vulkan"] in said
    empty = tmp_path / "empty"
    empty.mkdir()
    report = run_smoke(
        "linux-x86_64", None, empty, tmp_path / "smoke", backend="vulkan", python=[str(python)]
    )
    assert report.status == PASSED, report.table()
    _ran_media(report)


@pytest.mark.slow
@pytest.mark.needs_tree
def test_aarch64_wheel_runs_the_smoke_under_qemu(release_dir: Path, tmp_path: Path) -> None:
    """pip installs the linux-aarch64 wheel for an aarch64 CPython 3.11 on Debian 12's glibc 2.36
    (the platform's pick among the release's wheels; pip takes each manylinux tag it may pick
    as a --platform) into a folder that Debian's arm64 Python imports from."""
    site = tmp_path / "site"
    platforms = [a for n in range(36, 16, -1) for a in ("--platform", f"manylinux_2_{n}_aarch64")]
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(release_dir),
         "--target", str(site), *platforms, "--python-version", "3.11",
         "--implementation", "cp", "--only-binary", ":all:", "--no-deps",
         "--disable-pip-version-check", "llama-bindings"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _wheels(release_dir)["linux-aarch64"] in proc.stdout
    report = run_smoke("linux-aarch64", None, site, tmp_path / "smoke")
    assert report.status == PASSED, report.table()
    _ran_media(report)


@pytest.mark.slow
@pytest.mark.needs_tree
def test_windows_wheel_tags_contents_and_dll_imports(release_dir: Path, tmp_path: Path) -> None:
    wheel = release_dir / _wheels(release_dir)["windows-x86_64"]
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        info = json.loads(zf.read("llama_bindings/build-info.json"))
        tag_lines = [
            line for line in zf.read(next(n for n in names if n.endswith(".dist-info/WHEEL")))
            .decode().splitlines() if line.startswith("Tag:")
        ]  # fmt: skip
    assert tag_lines == ["Tag: py3-none-win_amd64"]
    runtime = ("libstdc++-6.dll", "libgcc_s_seh-1.dll", "libgomp-1.dll", "libwinpthread-1.dll")
    ours = ("libllama.dll", "ggml.dll", "ggml-base.dll", "ggml-cpu.dll", "ggml-rpc.dll",
            "libllama_mtp.dll", "libmtmd.dll")  # fmt: skip
    for name in (*runtime, *ours, "libllama_bindgen_abi.dll"):
        assert f"llama_bindings/lib/{name}" in names
        assert f"lib/{name}" in info["libraries"]
    assert "llama_bindings/abi_manifest.json" in names
    check_windows_wheel(wheel)  # delvewheel: every imported DLL is in the wheel or Windows'
    broken = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(broken, "w") as dst:
        for item in src.infolist():
            if not item.filename.endswith("/libgomp-1.dll"):
                dst.writestr(item, src.read(item))
    with pytest.raises(WheelNotMadeError, match=r"libgomp-1\.dll"):
        check_windows_wheel(broken)


def test_the_pull_request_names_the_wheels_a_merge_would_publish() -> None:
    from generator.commands.propose import wheels_section

    passed = [{"gate": "smoke", "status": "passed"}]
    gates = {
        "linux-x86_64": passed,
        "linux-x86_64-vulkan": passed,
        "windows-x86_64": passed,
        "linux-aarch64": [{"gate": "smoke", "status": "failed"}],
    }
    text = wheels_section("b11312", gates)
    version = wheel_version("b11312")
    assert f"`llama_bindings-{version}-*-manylinux_*_x86_64.whl`" in text
    assert f"`llama_bindings_vulkan-{version}-*-manylinux_*_x86_64.whl`" in text
    assert f"`llama_bindings-{version}-*-win_amd64.whl`" in text
    assert "aarch64" not in text  # its smoke failed: not published
