"""``assets.json``: what a release holds, for tools that download it.

Shape (llamadart-native's, plus the commit and the toolchain version, without a timestamp so the
file is reproducible)::

    {"format": 1, "generator_version": ..., "tag": ..., "commit": ..., "digest": ...,
     "artifacts": [{"file", "kind", "platform", "arch", "backend", "sha256", "size"}, ...]}

``kind`` is ``native`` (a build's archive), ``wheel`` (the bindings with that build's libraries
inside, :mod:`generator.release.wheels`) or ``bindings``; the bindings archive has platform, arch
and backend ``any``. Artifacts are sorted by file name.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from generator import __version__
from generator.hashing import file_sha256
from generator.release.render import render

ASSETS_NAME = "assets.json"
ASSETS_FORMAT = 1


@dataclass(frozen=True)
class Artifact:
    file: str
    kind: str
    platform: str
    arch: str
    backend: str
    sha256: str
    size: int

    @classmethod
    def of(cls, path: Path, kind: str, platform: str, arch: str, backend: str) -> Artifact:
        return cls(path.name, kind, platform, arch, backend, file_sha256(path), path.stat().st_size)


def manifest(tag: str, commit: str, digest: str, artifacts: list[Artifact]) -> dict[str, Any]:
    return {
        "format": ASSETS_FORMAT,
        "generator_version": __version__,
        "tag": tag,
        "commit": commit,
        "digest": digest,
        "artifacts": [asdict(a) for a in sorted(artifacts, key=lambda a: a.file)],
    }


def write_manifest(dest: Path, data: dict[str, Any]) -> Path:
    text = json.dumps(data, indent=2, sort_keys=True)
    dest.write_text(render("release/assets.json.j2", assets_json=text), encoding="utf-8")
    return dest
