"""Fake inputs of a release: native build folders, a generated/ folder and a releases.toml."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import tomlkit

COMMIT = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
TAG = "b11312"
DIGEST = "sha256:" + "ab" * 32
PASSED = {"build": "passed", "symbols": "passed", "layout": "passed", "smoke": "passed"}


def make_native(
    root: Path,
    platform: str,
    backend: str = "cpu",
    commit: str = COMMIT,
    folder: str | None = None,
) -> Path:
    """A folder shaped like `llama-bindgen build` output, with small distinct files."""
    d = root / (folder or platform)
    suffix = ".dll" if platform.startswith("windows") else ".so"
    libs = {f"lib/libllama{suffix}": b"llama " + platform.encode() + backend.encode()}
    libs[f"lib/libllama_mtp{suffix}"] = b"mtp " + platform.encode()
    for rel, body in libs.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_bytes(body)
    (d / "include").mkdir(exist_ok=True)
    (d / "include" / "llama.h").write_text("/* llama.h */\n")
    (d / "include" / "llama_mtp.h").write_text("/* llama_mtp.h */\n")
    info: dict[str, Any] = {
        "platform": platform,
        "tag": TAG,
        "commit": commit,
        "libraries": {rel: hashlib.sha256(body).hexdigest() for rel, body in libs.items()},
        "mtp": {"status": "supported", "reason": ""},
    }
    if backend != "cpu":
        info["backend"] = backend
    (d / "build-info.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    (d / "licenses").mkdir(exist_ok=True)
    (d / "licenses" / "LICENSE-llama.cpp").write_text("MIT License (llama.cpp)\n")
    (d / "licenses" / "LICENSE-jsonhpp").write_text("MIT License (json.hpp)\n")
    return d


def make_generated(root: Path, commit: str = COMMIT) -> Path:
    d = root / "generated"
    d.mkdir(parents=True, exist_ok=True)
    (d / "__init__.py").write_text('"""bindings"""\n')
    (d / "_cdef.py").write_text("CDEF = ''\n")
    (d / "abi_manifest.json").write_text(json.dumps({"commit": commit, "tag": TAG}) + "\n")
    (d / "LICENSE-llama.cpp").write_text("MIT License (llama.cpp)\n")
    (d / ".gitkeep").write_text("")
    (d / "__pycache__").mkdir(exist_ok=True)
    (d / "__pycache__" / "_cdef.cpython-311.pyc").write_bytes(b"cache")
    return d


def write_releases(
    path: Path,
    gates: dict[str, dict[str, str]] | None,
    notes: str | None = None,
) -> Path:
    """A releases.toml with one b11312 entry whose gate record is ``gates`` (None: no record)."""
    doc = tomlkit.document()
    doc["schema"] = 1
    doc["pinned"] = TAG
    entry = tomlkit.table()
    entry.update(
        {
            "ref": TAG,
            "tag": TAG,
            "commit": COMMIT,
            "digest": DIGEST,
            "digest_algorithm": "llama-bindgen-tree-v1",
            "mtp": True,
        }
    )
    if notes is not None:
        entry["notes"] = notes
    if gates is not None:
        record = tomlkit.table()
        record["generator_version"] = "0.1.0"
        record["providers"] = ["pypi-sdist llama-cpp-python==0.3.36"]
        record["diff_summary"] = "3 functions added, 0 breaking changes"
        for platform, results in gates.items():
            record[platform] = results
        entry["gates"] = record
    aot = tomlkit.aot()
    aot.append(entry)
    doc["release"] = aot
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")
    return path


def tree_snapshot(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` (relative path -> bytes)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
