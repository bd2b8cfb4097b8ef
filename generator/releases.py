"""Reading and writing ``releases.toml``: the known llama.cpp trees and the pinned release.

The schema is documented at the top of ``releases.toml`` and in README.md. tomlkit keeps the
file's comments and layout intact when entries are added.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit

from generator.errors import UsageError
from generator.paths import releases_path

SCHEMA_VERSION = 1
_HEX = re.compile(r"^[0-9a-f]{7,40}$")
_BUILD_TAG = re.compile(r"^b\d+$")


@dataclass(frozen=True)
class Sdist:
    """A PyPI sdist that vendors a llama.cpp tree at ``subdir``."""

    package: str
    version: str
    sha256: str
    subdir: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class Release:
    """One known llama.cpp commit (a ``[[release]]`` entry)."""

    ref: str
    tag: str
    commit: str
    digest: str
    digest_algorithm: str
    mtp: bool
    sdists: tuple[Sdist, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class ResolvedRef:
    """What a user's REF names: a known release, or an upstream tag/commit we have no pin for."""

    ref: str
    release: Release | None
    tag: str
    commit: str  # full commit when known, else the (possibly abbreviated) commit or ""

    @property
    def pinned(self) -> bool:
        return self.release is not None


def load_document(path: Path | None = None) -> tomlkit.TOMLDocument:
    p = path or releases_path()
    try:
        doc = tomlkit.parse(p.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise UsageError(f"{p} not found") from exc
    if doc.get("schema") != SCHEMA_VERSION:
        raise UsageError(f"{p}: schema {doc.get('schema')!r} is not {SCHEMA_VERSION}")
    return doc


def load_releases(path: Path | None = None) -> list[Release]:
    doc = load_document(path).unwrap()
    out: list[Release] = []
    known = {"ref", "tag", "commit", "digest", "digest_algorithm", "mtp", "sdist"}
    for entry in doc.get("release", []):
        sdists = tuple(
            Sdist(s["package"], s["version"], s["sha256"], s["subdir"])
            for s in entry.get("sdist", [])
        )
        out.append(
            Release(
                ref=entry["ref"],
                tag=entry.get("tag", ""),
                commit=entry["commit"],
                digest=entry["digest"],
                digest_algorithm=entry["digest_algorithm"],
                mtp=bool(entry.get("mtp", False)),
                sdists=sdists,
                extra={k: v for k, v in entry.items() if k not in known},
            )
        )
    return out


def resolve_ref(ref: str, releases: list[Release]) -> ResolvedRef:
    """Resolve a tag, a ``ref`` name, or a full or abbreviated commit.

    Known entries win; an abbreviated commit matching two entries is an error. An unknown name
    is returned unpinned: a ``bNNNN``-style name or any non-hex name as a tag, hex as a commit.
    """
    ref = ref.strip()
    if not ref:
        raise UsageError("empty REF: give a tag such as b11312 or a commit")
    for rel in releases:
        if ref in (rel.ref, rel.tag) and ref:
            return ResolvedRef(ref, rel, rel.tag, rel.commit)
    low = ref.lower()
    if _HEX.match(low):
        hits = [rel for rel in releases if rel.commit.startswith(low)]
        if len(hits) > 1:
            names = ", ".join(h.commit for h in hits)
            raise UsageError(f"commit prefix {ref} is ambiguous: {names}")
        if hits:
            return ResolvedRef(ref, hits[0], hits[0].tag, hits[0].commit)
        if not _BUILD_TAG.match(low):
            return ResolvedRef(ref, None, "", low)
    return ResolvedRef(ref, None, ref, "")
