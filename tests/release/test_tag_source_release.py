"""Releases of trees taken from PyPI sdists by tag: a lean tree (no licence files) never ships; a
full tree whose commit is unknown ships, recorded as "unknown (<its sdist>)"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import tomlkit

from generator.cli import main
from generator.commands.release import default_native_dir
from generator.releases import load_releases
from tests.release.fixtures import DIGEST, PASSED, TAG, make_generated, make_native

PLATFORMS = ("linux-x86_64", "windows-x86_64")
SDIST = {"package": "xllamacpp", "version": "2026.10.11549", "sha256": "cd" * 32,
         "subdir": "thirdparty/llama.cpp"}  # fmt: skip
LABEL = "unknown (PyPI sdist xllamacpp==2026.10.11549)"


def write_unknown_commit_release(path: Path) -> Path:
    """A releases.toml entry as `bump` records a tree with no known commit."""
    doc = tomlkit.document()
    doc["schema"] = 1
    doc["pinned"] = TAG
    entry = tomlkit.table()
    entry.update(
        {
            "ref": TAG,
            "tag": TAG,
            "commit": "",
            "commit_note": "the xllamacpp 2026.10.11549 sdist states no commit",
            "digest": DIGEST,
            "digest_algorithm": "llama-bindgen-tree-v1",
            "mtp": True,
        }
    )
    entry["sdist"] = tomlkit.aot()
    entry["sdist"].append(SDIST)
    gates = tomlkit.table()
    gates.update({"generator_version": "0.1.0", "diff_summary": "first pin",
                  "providers": ["PyPI sdist xllamacpp==2026.10.11549"]})  # fmt: skip
    for platform in PLATFORMS:
        gates[platform] = PASSED
    entry["gates"] = gates
    doc["release"] = tomlkit.aot()
    doc["release"].append(entry)
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")
    return path


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    native = tmp_path / "native"
    for platform in PLATFORMS:
        make_native(native, platform, commit=LABEL)
    return {
        "native": native,
        "generated": make_generated(tmp_path, commit=LABEL),
        "releases": write_unknown_commit_release(tmp_path / "releases.toml"),
    }


def release(inputs: dict[str, Path], out: Path) -> int:
    paths = {name: str(inputs[name]) for name in ("native", "generated", "releases")}
    return main(["release", TAG, "--out", str(out), *(f"--{k}={v}" for k, v in paths.items())])


def test_an_unknown_commit_release_ships_with_its_label(
    tmp_path: Path, inputs: dict[str, Path]
) -> None:
    (rel,) = load_releases(inputs["releases"])
    assert rel.commit == "" and rel.commit_label == LABEL
    assert default_native_dir(rel.cache_key).name == "tag-b11312-" + "ab" * 6
    out = tmp_path / "dist"
    assert release(inputs, out) == 0
    assets = json.loads((out / "assets.json").read_text())
    assert assets["commit"] == LABEL
    assert f"`{LABEL}`" in (out / "RELEASE_NOTES.md").read_text()


def test_a_lean_tree_is_never_shipped(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Its builds record what the tree lacked; the release is refused, not narrowed."""
    for platform in PLATFORMS:
        folder = inputs["native"] / platform
        info = json.loads((folder / "build-info.json").read_text())
        info["licenses"] = "missing: LICENSE, licenses/"
        (folder / "build-info.json").write_text(json.dumps(info))
        shutil.rmtree(folder / "licenses")
    (inputs["generated"] / "LICENSE-llama.cpp").unlink()
    out = tmp_path / "dist"
    assert release(inputs, out) == 3
    err = capsys.readouterr().err
    assert "cannot ship" in err and f"llama.cpp {TAG}" in err and LABEL in err
    assert "lacks LICENSE, licenses/" in err
    assert not out.exists()


def test_lean_bindings_alone_are_refused_too(
    tmp_path: Path, inputs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    (inputs["generated"] / "LICENSE-llama.cpp").unlink()
    assert release(inputs, tmp_path / "dist") == 3
    assert "without llama.cpp's LICENSE" in capsys.readouterr().err
