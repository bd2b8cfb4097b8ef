"""Reading and writing ``releases.toml``: the known llama.cpp trees and the pinned release.

The schema is documented at the top of ``releases.toml`` and in docs/reference/file-formats.md.
tomlkit keeps the file's comments and layout intact when entries are added.
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
UNKNOWN_COMMIT = "unknown"


def is_build_tag(name: str) -> bool:
    """Whether ``name`` is an upstream build tag (``b`` and a number, such as ``b11312``)."""
    return bool(_BUILD_TAG.match(name))


def tree_key(commit: str, tag: str, digest: str) -> str:
    """The name of a tree's cache folders (native builds, build folders, a bump's work folder):
    the first 12 hex digits of its commit, or, when the commit is unknown (``""``: a PyPI sdist
    that states none), ``tag-<tag>-<first 12 hex digits of the content digest>``."""
    if commit:
        return commit[:12]
    return f"tag-{tag or 'untagged'}-{digest.removeprefix('sha256:')[:12]}"


def commit_label(commit: str, source: str) -> str:
    """How a commit is shown and recorded: the commit, or for an unknown one ``unknown (<where
    the tree came from>)``; never a made-up value."""
    if commit:
        return commit
    return f"{UNKNOWN_COMMIT} ({source})" if source else UNKNOWN_COMMIT


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
    """One known llama.cpp tree (a ``[[release]]`` entry). ``commit`` is ``""`` for a tree whose
    source states no commit (a tag taken from a PyPI sdist); ``commit_note`` then says so."""

    ref: str
    tag: str
    commit: str
    digest: str
    digest_algorithm: str
    mtp: bool
    sdists: tuple[Sdist, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def commit_label(self) -> str:
        """The commit as the builds and bindings of this release record it (for an unknown one,
        ``unknown (PyPI sdist <requirement>)``: the tree's provider, as its fetch records it)."""
        source = f"PyPI sdist {self.sdists[0].requirement}" if self.sdists else ""
        return commit_label(self.commit, source)

    @property
    def cache_key(self) -> str:
        """See :func:`tree_key`."""
        return tree_key(self.commit, self.tag, self.digest)


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
        hits = [rel for rel in releases if rel.commit and rel.commit.startswith(low)]
        if len(hits) > 1:
            names = ", ".join(h.commit for h in hits)
            raise UsageError(f"commit prefix {ref} is ambiguous: {names}")
        if hits:
            return ResolvedRef(ref, hits[0], hits[0].tag, hits[0].commit)
        if not is_build_tag(low):
            return ResolvedRef(ref, None, "", low)
    return ResolvedRef(ref, None, ref, "")
