"""`llama-bindgen release`: what it writes, that it verifies, and what it refuses."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from generator.cli import main
from generator.release.gates import GATES_FILE
from tests.release.fixtures import (
    COMMIT,
    PASSED,
    TAG,
    make_generated,
    make_native,
    tree_snapshot,
    write_releases,
)

PLATFORMS = ("linux-x86_64", "linux-aarch64", "windows-x86_64")


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    native = tmp_path / "native"
    for platform in PLATFORMS:
        make_native(native, platform)
    notes = tmp_path / "report.md"
    notes.write_text("### Added\n\n* `llama_mtp_draft` (function)\n")
    return {
        "native": native,
        "generated": make_generated(tmp_path),
        "releases": write_releases(
            tmp_path / "releases.toml", dict.fromkeys(PLATFORMS, PASSED), notes="report.md"
        ),
    }


def release(inputs: dict[str, Path], out: Path, *extra: str) -> int:
    return main(
        [
            "release",
            TAG,
            "--out",
            str(out),
            "--native",
            str(inputs["native"]),
            "--generated",
            str(inputs["generated"]),
            "--releases",
            str(inputs["releases"]),
            *extra,
        ]
    )


def test_writes_verifiable_release(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "dist"
    assert release(inputs, out) == 0
    assert capsys.readouterr().out.splitlines()[-1] == str(out)
    names = sorted(p.name for p in out.iterdir())
    expected_archives = [
        f"llama-bindgen-bindings-{TAG}.tar.gz",
        f"llama-bindgen-linux-aarch64-cpu-{TAG}.tar.gz",
        f"llama-bindgen-linux-x86_64-cpu-{TAG}.tar.gz",
        f"llama-bindgen-windows-x86_64-cpu-{TAG}.zip",
    ]
    assert names == sorted([*expected_archives, "RELEASE_NOTES.md", "SHA256SUMS", "assets.json"])

    check = subprocess.run(
        ["sha256sum", "--check", "--strict", "SHA256SUMS"],
        cwd=out,
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count(": OK") == len(names) - 1

    assets = json.loads((out / "assets.json").read_text())
    assert (assets["tag"], assets["commit"]) == (TAG, COMMIT)
    by_file = {a["file"]: a for a in assets["artifacts"]}
    assert sorted(by_file) == expected_archives
    for name, entry in by_file.items():
        data = (out / name).read_bytes()
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
        assert entry["size"] == len(data)
    win = by_file[f"llama-bindgen-windows-x86_64-cpu-{TAG}.zip"]
    assert (win["platform"], win["arch"], win["backend"]) == ("windows", "x86_64", "cpu")

    # The native archive holds the build folder's libraries, headers and build-info.json.
    with tarfile.open(out / f"llama-bindgen-linux-aarch64-cpu-{TAG}.tar.gz") as tar:
        top = f"llama-bindgen-linux-aarch64-cpu-{TAG}"
        members = {m.name for m in tar.getmembers() if m.isfile()}
        lib = tar.extractfile(f"{top}/lib/libllama.so")
        assert lib is not None
        assert lib.read() == (inputs["native"] / "linux-aarch64/lib/libllama.so").read_bytes()
    assert members == {f"{top}/{rel}" for rel in tree_snapshot(inputs["native"] / "linux-aarch64")}
    with zipfile.ZipFile(out / f"llama-bindgen-windows-x86_64-cpu-{TAG}.zip") as zf:
        assert f"llama-bindgen-windows-x86_64-cpu-{TAG}/lib/libllama.dll" in zf.namelist()
    with tarfile.open(out / f"llama-bindgen-bindings-{TAG}.tar.gz") as tar:
        bindings = {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()}
    assert bindings == {"__init__.py", "_cdef.py", "abi_manifest.json", "LICENSE-llama.cpp"}

    notes = (out / "RELEASE_NOTES.md").read_text()
    assert "`llama_mtp_draft` (function)" in notes
    assert COMMIT in notes and "3 functions added" in notes
    assert by_file[expected_archives[0]]["sha256"] in notes
    for platform in PLATFORMS:
        assert f"| {platform} | passed | passed | passed | passed |" in notes
    assert not list(tmp_path.glob(".dist.partial-*"))


def test_two_runs_give_identical_bytes(tmp_path: Path, inputs: dict[str, Path]) -> None:
    assert release(inputs, tmp_path / "a") == 0
    for p in (inputs["native"] / "linux-x86_64").rglob("*"):
        p.touch()  # new mtimes must not change a byte
    assert release(inputs, tmp_path / "b") == 0
    assert tree_snapshot(tmp_path / "a") == tree_snapshot(tmp_path / "b")


def refused(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str], reason: str
) -> None:
    out = tmp_path / "dist"
    code = release(inputs, out)
    err = capsys.readouterr().err
    assert code != 0, "the release must be refused"
    assert reason in err, err
    assert not out.exists(), "a refused release writes nothing"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_failed_gate_leaves_the_platform_out(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A platform whose gate failed or did not run is not packed; the others are, and the notes
    name the left-out one with the reason."""
    gates = dict.fromkeys(PLATFORMS, PASSED)
    gates["linux-aarch64"] = {**PASSED, "layout": "failed"}
    gates["windows-x86_64"] = {**PASSED, "smoke": "not-run"}
    write_releases(inputs["releases"], gates)
    out = tmp_path / "dist"
    assert release(inputs, out) == 0
    err = capsys.readouterr().err
    assert "left out linux-aarch64: gates did not all pass: layout = 'failed'" in err
    assert "left out windows-x86_64: gates did not all pass: smoke = 'not-run'" in err
    names = sorted(p.name for p in out.iterdir())
    assert f"llama-bindgen-linux-x86_64-cpu-{TAG}.tar.gz" in names
    assert not [n for n in names if "aarch64" in n or "windows" in n]
    notes = (out / "RELEASE_NOTES.md").read_text()
    assert "- linux-aarch64: gates did not all pass: layout = 'failed'" in notes
    assert "| linux-aarch64 |" not in notes


def test_nothing_passed_is_refused(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    write_releases(inputs["releases"], {p: {**PASSED, "smoke": "failed"} for p in PLATFORMS})
    refused(tmp_path, inputs, capsys, "no native build passed every gate")


def test_entry_without_gates_is_refused(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    write_releases(inputs["releases"], None)
    refused(tmp_path, inputs, capsys, "no [release.gates] record")


def test_native_build_of_another_commit_is_refused(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    make_native(inputs["native"], "linux-x86_64", commit="f" * 40)
    refused(tmp_path, inputs, capsys, "built from commit 'ffff")


def test_tampered_library_is_refused(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    (inputs["native"] / "linux-x86_64/lib/libllama.so").write_bytes(b"changed")
    refused(tmp_path, inputs, capsys, "does not match its recorded sha256")


def test_gated_platform_without_build_is_left_out(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.rmtree(inputs["native"] / "linux-aarch64")
    out = tmp_path / "dist"
    assert release(inputs, out) == 0
    assert "left out linux-aarch64: its gates are recorded" in capsys.readouterr().err
    assert "- linux-aarch64: its gates are recorded" in (out / "RELEASE_NOTES.md").read_text()


def test_bindings_of_another_commit_are_refused(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    make_generated(tmp_path, commit="e" * 40)
    refused(tmp_path, inputs, capsys, "holds bindings for commit 'eeee")


def test_nonempty_out_is_left_alone(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "dist"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert release(inputs, out) != 0
    assert "not an empty folder" in capsys.readouterr().err
    assert tree_snapshot(out) == {"keep.txt": b"mine"}


def _ci_job(folder: Path, backend: str, build: str, gates: Path | None) -> int:
    from generator.release.ci_job import main as ci_job

    argv = [str(folder), "--platform", "linux-x86_64", "--backend", backend, "--build", build]
    return ci_job([*argv, *(["--gates", str(gates)] if gates else [])])


def test_ci_gate_records_admit_extra_builds(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A CI job's build (here linux-x86_64/cuda) ships only with its own gates.json saying every
    gate passed: without a record, or with one that has a not-run gate, it is left out."""
    cuda = make_native(inputs["native"], "linux-x86_64", "cuda", folder="native-linux-x86_64-cuda")
    without = tmp_path / "without-record"
    assert release(inputs, without) == 0
    assert "left out linux-x86_64-cuda: no gate record" in capsys.readouterr().err
    assert not (without / f"llama-bindgen-linux-x86_64-cuda-{TAG}.tar.gz").exists()

    result = tmp_path / "gates-result.json"
    statuses = {**PASSED, "smoke": "not-run"}
    doc = {"platform": "linux-x86_64", "backend": "cuda", "gates": statuses,
           "details": {"smoke": "no GPU"}}  # fmt: skip
    result.write_text(json.dumps(doc))
    assert _ci_job(cuda, "cuda", "success", result) == 3
    partial = tmp_path / "partial"
    assert release(inputs, partial) == 0
    assert "left out linux-x86_64-cuda: gates did not all pass: smoke = 'not-run' (no GPU)" in (
        capsys.readouterr().err
    )

    result.write_text(json.dumps({**doc, "gates": PASSED, "details": {}}))
    assert _ci_job(cuda, "cuda", "success", result) == 0
    assert (cuda / GATES_FILE).is_file()
    out = tmp_path / "dist"
    assert release(inputs, out) == 0
    assert (out / f"llama-bindgen-linux-x86_64-cuda-{TAG}.tar.gz").is_file()
    notes = (out / "RELEASE_NOTES.md").read_text()
    assert "| linux-x86_64-cuda | passed | passed | passed | passed |" in notes


def test_a_failed_ci_build_is_named(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A job whose build failed uploads only its gate record: the release names it."""
    folder = inputs["native"] / "native-linux-x86_64-vulkan"
    assert _ci_job(folder, "vulkan", "failure", None) == 1
    out = tmp_path / "dist"
    assert release(inputs, out) == 0
    err = capsys.readouterr().err
    assert "left out linux-x86_64-vulkan: not built: build = 'failed'" in err
    assert "- linux-x86_64-vulkan: not built" in (out / "RELEASE_NOTES.md").read_text()


def test_native_archives_and_bindings_carry_the_licences(
    tmp_path: Path, inputs: dict[str, Path]
) -> None:
    out = tmp_path / "dist"
    assert release(inputs, out) == 0
    top = f"llama-bindgen-linux-aarch64-cpu-{TAG}"
    with tarfile.open(out / f"{top}.tar.gz") as tar:
        names = {m.name for m in tar.getmembers() if m.isfile()}
    assert {f"{top}/licenses/LICENSE-llama.cpp", f"{top}/licenses/LICENSE-jsonhpp"} <= names
    win = f"llama-bindgen-windows-x86_64-cpu-{TAG}"
    with zipfile.ZipFile(out / f"{win}.zip") as zf:
        assert f"{win}/licenses/LICENSE-llama.cpp" in zf.namelist()


def test_a_build_without_licences_is_left_out(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.rmtree(inputs["native"] / "linux-aarch64" / "licenses")
    out = tmp_path / "dist"
    assert release(inputs, out) == 0
    assert "left out linux-aarch64: " in capsys.readouterr().err
    assert not (out / f"llama-bindgen-linux-aarch64-cpu-{TAG}.tar.gz").exists()
    notes = (out / "RELEASE_NOTES.md").read_text()
    assert "- linux-aarch64: " in notes and "licenses/LICENSE-llama.cpp" in notes


def test_bindings_without_the_licence_are_refused(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    (inputs["generated"] / "LICENSE-llama.cpp").unlink()
    refused(tmp_path, inputs, capsys, "LICENSE-llama.cpp")
