"""The native build folders a release packs: ``<native>/<folder>/{lib,include,build-info.json}``.

``llama-bindgen build --out DIR`` writes one folder per platform; a CI job's artifact may hold the
same layout under another folder name. What a folder is comes from its ``build-info.json``
(``platform``, ``backend`` (``cpu`` when absent), ``commit``, ``libraries``: path -> sha256), never
from its name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator.hashing import file_sha256
from generator.platforms import PLATFORMS
from generator.release.errors import ReleaseRefusedError

BUILD_INFO_NAME = "build-info.json"
PACKED_ENTRIES: tuple[str, ...] = ("build-info.json", "include", "lib", "licenses")
DEFAULT_BACKEND = "cpu"


@dataclass(frozen=True)
class NativeBuild:
    folder: Path
    platform: str  # "linux-x86_64", "android-arm64-v8a"
    backend: str
    info: dict[str, Any]

    @property
    def os_name(self) -> str:
        return self.platform.split("-", 1)[0]

    @property
    def arch(self) -> str:
        return self.platform.split("-", 1)[1] if "-" in self.platform else ""

    @property
    def archive_ext(self) -> str:
        return PLATFORMS[self.platform].archive_format

    def archive_name(self, tag: str) -> str:
        return f"llama-bindgen-{self.platform}-{self.backend}-{tag}.{self.archive_ext}"


def _read_info(folder: Path) -> dict[str, Any]:
    path = folder / BUILD_INFO_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReleaseRefusedError(f"{path}: unreadable build-info ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("platform"), str):
        raise ReleaseRefusedError(f"{path}: no platform recorded")
    if data["platform"] not in PLATFORMS:
        raise ReleaseRefusedError(f"{path}: unknown platform {data['platform']!r}")
    return data


def _check_build(folder: Path, info: dict[str, Any], commit: str) -> None:
    where = f"{folder / BUILD_INFO_NAME}"
    if info.get("commit") != commit:
        raise ReleaseRefusedError(
            f"{where}: built from commit {info.get('commit')!r}, the release is {commit}"
        )
    for sub in ("lib", "include"):
        if not (folder / sub).is_dir():
            raise ReleaseRefusedError(f"{folder}: no {sub}/ folder")
    libraries = info.get("libraries")
    if not isinstance(libraries, dict) or not libraries:
        raise ReleaseRefusedError(f"{where}: lists no libraries")
    for rel, digest in sorted(libraries.items()):
        path = folder / rel
        if not path.is_file():
            raise ReleaseRefusedError(f"{where}: library {rel} is missing")
        if file_sha256(path) != str(digest).removeprefix("sha256:"):
            raise ReleaseRefusedError(f"{where}: library {rel} does not match its recorded sha256")


def find_native_builds(native_dir: Path, commit: str) -> list[NativeBuild]:
    """Every build folder directly below ``native_dir``, checked against ``commit``."""
    if not native_dir.is_dir():
        raise ReleaseRefusedError(
            f"no native builds at {native_dir}: run `llama-bindgen build` for each platform "
            "or pass --native DIR"
        )
    builds: dict[tuple[str, str], NativeBuild] = {}
    for folder in sorted(p for p in native_dir.iterdir() if p.is_dir()):
        if not (folder / BUILD_INFO_NAME).is_file():
            continue
        info = _read_info(folder)
        _check_build(folder, info, commit)
        backend = str(info.get("backend", DEFAULT_BACKEND))
        build = NativeBuild(folder, info["platform"], backend, info)
        key = (build.platform, build.backend)
        if key in builds:
            raise ReleaseRefusedError(
                f"{build.platform}/{build.backend} is built twice: "
                f"{builds[key].folder} and {folder}"
            )
        builds[key] = build
    if not builds:
        raise ReleaseRefusedError(f"{native_dir} holds no folder with a {BUILD_INFO_NAME}")
    return [builds[k] for k in sorted(builds)]
