"""build-info.json: what a native build was made from and the sha256 of every library it produced.

The file is deterministic (sorted keys, no timestamps, no absolute paths), so two builds of the same
inputs with the same compilers write the same bytes apart from the library hashes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator.hashing import file_sha256
from generator.paths import package_dir

BUILD_INFO_NAME = "build-info.json"
BUILD_INFO_FORMAT = 1
# The wrapper's build inputs: its CMake project and probes, its C and C++ sources and headers.
WRAPPER_SOURCE_SUFFIXES: tuple[str, ...] = (".txt", ".cmake", ".h", ".cpp")


def wrapper_sources() -> list[str]:
    """Every build input of the wrapper, as paths relative to the package, sorted."""
    root = package_dir()
    return sorted(
        p.relative_to(root).as_posix()
        for p in (root / "native_wrapper").iterdir()
        if p.is_file() and p.suffix in WRAPPER_SOURCE_SUFFIXES
    )


def wrapper_sources_sha256() -> str:
    """One digest over the wrapper's sources, the platform registry and the native templates
    (paths relative to the package, so every copy of one version gives one digest)."""
    h = hashlib.sha256()
    root = package_dir()
    extra = sorted(
        p.relative_to(root).as_posix()
        for p in [root / "platforms.py", *(root / "templates" / "native").iterdir()]
        if p.is_file()
    )
    for rel in [*wrapper_sources(), *extra]:
        h.update(rel.encode() + b"\0")
        h.update((root / rel).read_bytes())
        h.update(b"\0")
    return h.hexdigest()


@dataclass(frozen=True)
class MtpSupport:
    supported: bool
    reason: str  # "" when supported
    # The variant each of the wrapper's probes chose for this tree ("facet=variant ...", see
    # native_wrapper/upstream_probes.cmake); "" when the probes did not run (no MTP API).
    probes: str = ""

    def describe(self) -> str:
        return "supported" if self.supported else f"unsupported ({self.reason})"

    def to_json(self) -> dict[str, Any]:
        data = {"status": "supported" if self.supported else "unsupported", "reason": self.reason}
        if self.probes:
            data["probes"] = self.probes
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> MtpSupport:
        return MtpSupport(
            data.get("status") == "supported",
            str(data.get("reason", "")),
            str(data.get("probes", "")),
        )


def write_build_info(path: Path, info: dict[str, Any]) -> None:
    path.write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def read_build_info(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def libraries_intact(platform_dir: Path, info: dict[str, Any]) -> bool:
    """Every library build-info lists exists with the recorded sha256."""
    libs = info.get("libraries")
    if not isinstance(libs, dict) or not libs:
        return False
    for rel, digest in libs.items():
        path = platform_dir / rel
        if not path.is_file() or file_sha256(path) != digest:
            return False
    return True
