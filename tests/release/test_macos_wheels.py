"""macOS wheels made here: the Mach-O checks on small libraries zig links for macOS (each way a
macOS loader would fail inside a wheel), then the wheels of the pin's zig-built macos-arm64 and
macos-x86_64 (``nox -s macos_x86_64``) builds made by ``llama-bindgen wheel``: the tag, the files
under their install names, every load command resolving inside the wheel or macOS, and the record
that no release gated it. No macOS machine is here, so nothing is loaded by a macOS loader: the
builds are never smoke-tested."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from generator.commands import wheel as wheel_command
from generator.release import macos_wheels
from generator.release.wheels import NOT_GATED
from tests.conftest import BuildFactory
from tests.repo import REPO_ROOT
from tests.trees import PIN

ARM = "aarch64-macos.13.0"


def _dylib(folder: Path, name: str, install_name: str, *links: str, target: str = ARM) -> Path:
    """``folder/name``, a macOS library made by zig's clang, with ``links`` as linker arguments
    (libraries to depend on, ``-rpath`` values)."""
    source = folder / f"{name}.c"
    source.write_text(f"int {name.split('.')[0].replace('-', '_')}_value(void) {{ return 1; }}\n")
    out = folder / name
    args = [sys.executable, "-m", "ziglang", "cc", "-target", target, "-shared", "-o", str(out),
            str(source), f"-Wl,-install_name,{install_name}", *links]  # fmt: skip
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return out


def _pair(folder: Path, rpath: bool = True, base_name: str = "@rpath/libbase.0.dylib") -> Path:
    """libbase.0.dylib and libtop.dylib (which needs libbase) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    base = _dylib(folder, "libbase.0.dylib", base_name)
    extra = ["-Wl,-rpath,@loader_path"] if rpath else []
    _dylib(folder, "libtop.dylib", "@rpath/libtop.dylib", str(base), *extra)
    return folder


def test_libraries_that_find_each_other_by_rpath_pass(tmp_path: Path) -> None:
    folder = _pair(tmp_path / "ok")
    top = macos_wheels.read_links(folder / "libtop.dylib")
    assert top.install_name == "@rpath/libtop.dylib"
    assert "@rpath/libbase.0.dylib" in top.dependencies
    assert any(d.startswith("/usr/lib/libSystem") for d in top.dependencies)
    assert top.rpaths == ("@loader_path",)
    assert macos_wheels.check_libraries(folder.glob("*.dylib")) == []
    assert macos_wheels.wheel_name(folder / "libbase.0.dylib") == "libbase.0.dylib"


def test_the_tag_is_the_libraries_minimum_macos(tmp_path: Path) -> None:
    arm = _pair(tmp_path / "arm")
    assert macos_wheels.platform_tag(arm.glob("*.dylib"), "arm64") == "macosx_13_0_arm64"
    intel = tmp_path / "intel"
    intel.mkdir()
    _dylib(intel, "libold.dylib", "@rpath/libold.dylib", target="x86_64-macos.10.15")
    assert macos_wheels.platform_tag(intel.glob("*.dylib"), "x86_64") == "macosx_10_15_x86_64"


def test_no_rpath_is_refused(tmp_path: Path) -> None:
    folder = _pair(tmp_path / "no-rpath", rpath=False)
    (problem,) = macos_wheels.check_libraries(folder.glob("*.dylib"))
    assert problem.startswith("libtop.dylib: loads @rpath/ libraries but has no @loader_path")


def test_a_build_folder_install_name_is_refused(tmp_path: Path) -> None:
    folder = _pair(tmp_path / "absolute", base_name="/build/cmake/bin/libbase.0.dylib")
    problems = macos_wheels.check_libraries(folder.glob("*.dylib"))
    assert "libbase.0.dylib: install name '/build/cmake/bin/libbase.0.dylib'" in problems[0]
    assert (
        "libtop.dylib: needs '/build/cmake/bin/libbase.0.dylib', neither in the wheel"
        in (problems[1])
    )


def test_a_dependency_the_wheel_lacks_is_refused(tmp_path: Path) -> None:
    folder = _pair(tmp_path / "lacking")
    (folder / "libbase.0.dylib").unlink()
    (problem,) = macos_wheels.check_libraries(folder.glob("*.dylib"))
    assert "needs '@rpath/libbase.0.dylib', which the wheel does not hold" in problem


def test_a_file_that_is_not_mach_o_is_named(tmp_path: Path) -> None:
    (tmp_path / "libnot.dylib").write_bytes(b"\x7fELF not at all")
    (problem,) = macos_wheels.check_libraries([tmp_path / "libnot.dylib"])
    assert problem.startswith("libnot.dylib: not a Mach-O file")


# macos-x86_64's cold build (zig, with the chat layer) is 7 minutes of a cold .ci/run on 2 cores:
# its wheel is checked by `nox -s macos_x86_64` (marker macos_x86_64, deselected by default); the
# release workflow builds it on a macOS runner
@pytest.fixture(
    scope="module",
    params=["macos-arm64", pytest.param("macos-x86_64", marks=pytest.mark.macos_x86_64)],
)
def macos_wheel(
    request: pytest.FixtureRequest,
    tree_pin: Path,
    native_build: BuildFactory,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    build = native_build(tree_pin, request.param)
    out = tmp_path_factory.mktemp("macos-wheel")
    args = argparse.Namespace(
        ref=PIN, platform=request.param, backend="cpu", out=out,
        native=build.lib_dir.parent.parent, generated=REPO_ROOT / "generated",
        releases=REPO_ROOT / "releases.toml",
    )  # fmt: skip
    assert wheel_command.run(args) == 0
    (made,) = out.glob("*.whl")
    return made


@pytest.mark.slow
@pytest.mark.needs_tree
def test_a_macos_wheel_resolves_inside_itself(macos_wheel: Path, tmp_path: Path) -> None:
    name = macos_wheel.name
    machine = "arm64" if name.endswith("_arm64.whl") else "x86_64"
    pattern = rf"llama_bindings-{PIN[1:]}\.[0-9.]+-py3-none-macosx_\d+_\d+_{machine}\.whl"
    assert re.fullmatch(pattern, name), name
    with zipfile.ZipFile(macos_wheel) as zf:
        zf.extractall(tmp_path)
    lib = tmp_path / "llama_bindings" / "lib"
    shipped = sorted(p.name for p in lib.iterdir())
    assert shipped == [
        "libggml-base.0.dylib", "libggml-cpu.0.dylib", "libggml-rpc.0.dylib", "libggml.0.dylib",
        "libllama.0.dylib", "libllama_bindgen_abi.dylib", "libllama_mtp.dylib",
        "libmtmd.0.dylib",
    ]  # fmt: skip
    assert macos_wheels.check_libraries(lib.iterdir()) == []
    top = macos_wheels.read_links(lib / "libllama_mtp.dylib")
    assert "@rpath/libllama.0.dylib" in top.dependencies and "@loader_path" in top.rpaths
    tag = name.removesuffix(".whl").rsplit("-", 1)[-1]
    assert tag == macos_wheels.platform_tag(lib.iterdir(), machine)
    info = json.loads((tmp_path / "llama_bindings" / "build-info.json").read_text())
    assert info["wheel"]["gates"] == NOT_GATED
    assert sorted(info["libraries"]) == [f"lib/{n}" for n in shipped]


@pytest.mark.slow
@pytest.mark.needs_tree
def test_the_bindings_loader_finds_the_wheel_s_library_names(
    macos_wheel: Path, tmp_path: Path
) -> None:
    """The generated loader's names for macOS include the versioned install names."""
    with zipfile.ZipFile(macos_wheel) as zf:
        zf.extractall(tmp_path)
    code = (
        "import sys; from pathlib import Path\n"
        "from llama_bindings import loader\n"
        "lib = Path(sys.argv[1])\n"
        "found = {}\n"
        "for stem in ('llama', 'ggml', 'ggml-base', 'ggml-cpu', 'ggml-rpc', 'llama_mtp', 'mtmd'):\n"
        "    names = loader.file_names(stem, 'darwin')\n"
        "    hits = [p.name for n in names for p in sorted(lib.glob(n))]\n"
        "    found[stem] = hits[0] if hits else None\n"
        "print(found)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "llama_bindings" / "lib")],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str({
        "llama": "libllama.0.dylib", "ggml": "libggml.0.dylib", "ggml-base": "libggml-base.0.dylib",
        "ggml-cpu": "libggml-cpu.0.dylib", "ggml-rpc": "libggml-rpc.0.dylib",
        "llama_mtp": "libllama_mtp.dylib", "mtmd": "libmtmd.0.dylib",
    })  # fmt: skip
