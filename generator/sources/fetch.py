"""Fetch a verified llama.cpp tree into the cache: resolve, try providers in order, verify, move.

Cache layout (``--cache`` or :func:`generator.paths.default_cache_dir`)::

    trees/<commit>/          verified trees, each with .llama-bindgen-tree.json
    trees/tag-<tag>-<d12>/   verified trees whose commit is unknown (a tag from a PyPI sdist),
                             named by tag and the first 12 hex digits of their content digest
    sdists/                  PyPI sdists (kept: they are the expensive offline route)
    tmp/<pid>-<random>/      work area of one running fetch; removed on success and failure

A tree enters ``trees/`` by one ``rename`` after its digest matched, so an interrupted run leaves
at most a ``tmp/`` folder, which no later run trusts (stale ones are removed).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from generator.errors import BindgenError, DigestMismatchError, SourceError
from generator.paths import tag_sources_paths
from generator.releases import (
    Release,
    ResolvedRef,
    Sdist,
    is_build_tag,
    load_releases,
    resolve_ref,
    tree_key,
)
from generator.sources.digest import DIGEST_ALGORITHM, tree_digest
from generator.sources.extract import archive_prefix, safe_extract
from generator.sources.licenses import licence_status, missing_licenses
from generator.sources.providers import (
    GITHUB_BASE_URL,
    ArchiveProvider,
    LocalProvider,
    Material,
    Provider,
    SdistProvider,
    TagSdistProvider,
)
from generator.sources.tag_sources import (
    TagSource,
    load_tag_sources,
    pin_licences,
    record_tag_source,
)
from generator.sources.tree import Tree
from generator.sources.tree_metadata import TREE_METADATA, load_tree_metadata


@dataclass(frozen=True)
class FetchResult(Tree):
    """The fetched tree, and how the fetch went."""

    from_cache: bool
    pinned: bool


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def read_tree_metadata(tree: Path) -> dict[str, str]:
    """The metadata a fetch wrote beside a tree (ref, tag, commit, digest, provider)."""
    meta = load_tree_metadata(tree)
    if meta is None:
        raise SourceError(f"{tree}: no {TREE_METADATA}: fetch it with llama-bindgen")
    return meta


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _clean_stale_tmp(tmp_root: Path) -> None:
    """Remove work folders left by fetches whose process no longer runs."""
    for entry in tmp_root.iterdir():
        pid_text = entry.name.split("-", 1)[0]
        if pid_text.isdigit() and not _pid_alive(int(pid_text)):
            shutil.rmtree(entry, ignore_errors=True)


def _find_tree_root(folder: Path) -> Path:
    if (folder / "include" / "llama.h").is_file():
        return folder
    hits = sorted(folder.glob("**/include/llama.h"), key=lambda p: len(p.parts))
    if not hits:
        raise SourceError(f"{folder}: no include/llama.h: not a llama.cpp tree")
    return hits[0].parent.parent


def _copy_folder(src: Path, dest: Path) -> None:
    """Copy a local tree, refusing symbolic links that point outside it."""
    root = src.resolve()
    for path in src.rglob("*"):
        if path.is_symlink():
            target = (path.parent / os.readlink(path)).resolve()
            if not target.is_relative_to(root):
                from generator.errors import UnsafeArchiveError

                raise UnsafeArchiveError(f"{path}: link points outside the tree ({target})")
    shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns(".git"))


def _materialise(material: Material, work: Path) -> Path:
    dest = work / "tree"
    if material.folder is not None:
        _copy_folder(_find_tree_root(material.folder), dest)
        return dest
    assert material.archive is not None
    safe_extract(material.archive, dest, archive_prefix(material.archive, subdir=material.subdir))
    return dest


@dataclass(frozen=True)
class _TagRoute:
    """An upstream build tag releases.toml does not pin, fetched with no --mirror or --source:
    its PyPI sdist, recorded in ``path`` (``pin``: the entry, once recorded)."""

    path: Path
    pin: TagSource | None


def _tag_route(
    want: ResolvedRef,
    cache: Path,
    tag_sources: Path | None,
    mirror: str | None,
    source: Path | None,
) -> _TagRoute | None:
    if want.release is not None or not is_build_tag(want.tag) or mirror or source is not None:
        return None
    path, below = (tag_sources, None) if tag_sources is not None else tag_sources_paths(cache)
    pins = load_tag_sources(path)
    if below is not None:  # outside a checkout: the bundled record wins over the cache's
        pins.update(load_tag_sources(below))
    return _TagRoute(path, pins.get(want.tag))


def _providers(
    want: ResolvedRef,
    cache: Path,
    mirror: str | None,
    source: Path | None,
    github_base: str | None,
    allow_dirty: bool = False,
    route: _TagRoute | None = None,
) -> list[Provider]:
    if route is not None and route.pin is not None:  # the recorded sdist, and only it
        return [TagSdistProvider(want.tag, cache / "sdists", route.pin.sdist)]
    providers: list[Provider] = []
    if github_base:
        providers.append(ArchiveProvider(github_base, "GitHub archive"))
    if mirror:
        providers.append(ArchiveProvider(mirror, "mirror"))
    if source is not None:
        providers.append(LocalProvider(source, allow_dirty))
    if want.release is not None:
        providers.extend(SdistProvider(s, cache / "sdists") for s in want.release.sdists)
    if route is not None:
        providers.append(TagSdistProvider(want.tag, cache / "sdists"))
    return providers


def _cache_hit(tree: Path, expected_digest: str) -> bool:
    """True when ``tree`` is a fetched tree whose content still has ``expected_digest``."""
    if not (tree / TREE_METADATA).is_file():
        return False
    actual = tree_digest(tree)
    if actual == expected_digest:
        return True
    _log(f"cached tree {tree} no longer matches its digest ({actual}); fetching it again")
    shutil.rmtree(tree, ignore_errors=True)
    return False


def _cache_slot(
    ref: str, want: ResolvedRef, trees: Path, route: _TagRoute | None
) -> tuple[Path | None, str]:
    """Where the cache would hold the tree, and the digest it must have there."""
    if want.release is not None:
        rel = want.release
        return trees / (rel.commit or rel.cache_key), rel.digest
    if route is not None and route.pin is not None:
        pin = route.pin
        _log(
            f"{ref}: not in releases.toml; {route.path.name} records it: PyPI sdist "
            f"{pin.package}=={pin.version}, {pin.digest}, commit unknown"
        )
        return trees / tree_key("", want.tag, pin.digest), pin.digest
    if route is not None:
        _log(
            f"{ref}: not in releases.toml or {route.path.name}; a tree found in a PyPI sdist is "
            f"recorded there on this first fetch (unpinned)"
        )
    else:
        _log(f"{ref}: not in releases.toml; its digest will be recorded on first fetch (unpinned)")
    hit = trees / want.commit if len(want.commit) == 40 else None
    expected = read_tree_metadata(hit).get("digest", "") if hit and hit.is_dir() else ""
    return hit, expected


def fetch_tree(
    ref: str,
    cache: Path | None = None,
    *,
    mirror: str | None = None,
    source: Path | None = None,
    github_base: str | None = GITHUB_BASE_URL,
    releases: list[Release] | None = None,
    allow_dirty: bool = False,
    tag_sources: Path | None = None,
) -> FetchResult:
    """Return a verified tree for ``ref``, fetching it through the first provider that works.

    ``tag_sources``: the ``tag-sources.toml`` to read and record build tags in (default: the
    checkout's, else the cache's over the bundled one; see :func:`tag_sources_paths`)."""
    from generator.paths import default_cache_dir

    cache = (cache or default_cache_dir()).resolve()
    known = releases if releases is not None else load_releases()
    want = resolve_ref(ref, known)
    trees = cache / "trees"
    route = _tag_route(want, cache, tag_sources, mirror, source)
    hit, expected = _cache_slot(ref, want, trees, route)
    if hit is not None and hit.is_dir() and _cache_hit(hit, expected):
        meta = read_tree_metadata(hit)
        commit = hit.name if len(hit.name) == 40 else ""  # else a tag-<tag>-<digest12> folder
        _log(f"{ref}: cached tree {commit[:12] or hit.name} verified ({expected})")
        return FetchResult(
            hit,
            meta.get("ref", ref),
            meta.get("tag", want.tag),
            commit,
            expected,
            meta.get("provider", "cache"),
            True,
            want.release is not None,
        )
    providers = _providers(want, cache, mirror, source, github_base, allow_dirty, route)
    if not providers:
        raise SourceError(f"{ref}: no provider to try (not pinned, and no --mirror or --source)")
    return _first_that_works(ref, want, providers, cache, known, route)


def _first_that_works(
    ref: str,
    want: ResolvedRef,
    providers: list[Provider],
    cache: Path,
    known: Sequence[Release],
    route: _TagRoute | None,
) -> FetchResult:
    tmp_root = cache / "tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    _clean_stale_tmp(tmp_root)
    failures: list[str] = []
    mismatch: DigestMismatchError | None = None
    for provider in providers:
        _log(f"{ref}: trying {provider.name}")
        work = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=tmp_root))
        try:
            result = _try_provider(provider, want, work, cache / "trees", known, route)
        except BindgenError as exc:
            reason = str(exc)
            failures.append(f"{provider.name}: {reason}")
            _log(f"{ref}: {provider.name} failed: {reason}")
            if isinstance(exc, DigestMismatchError):
                mismatch = mismatch or exc
                _log(f"{ref}: refused: expected {exc.expected}, got {exc.actual}")
            continue
        finally:
            shutil.rmtree(work, ignore_errors=True)
        _log(f"{ref}: tree {result.cache_key} verified from {result.provider}")
        return result
    message = f"{ref}: every provider failed: " + "; ".join(failures)
    if mismatch is not None:  # a pin was contradicted: say so in the error's type too
        raise DigestMismatchError(ref, mismatch.expected, mismatch.actual, message=message)
    raise SourceError(message)


def _known_release(want: ResolvedRef, commit: str, known: Sequence[Release]) -> Release | None:
    """The release ``want`` names, or else the known release of the commit the material stated:
    an unpinned tag or commit whose tree turns out to be a pinned commit is held to that pin's
    digest (it would otherwise replace the verified tree of that commit in the cache)."""
    if want.release is not None or not commit:
        return want.release
    return next((rel for rel in known if rel.commit == commit), None)


def _commit_of(provider: Provider, want: ResolvedRef, material: Material) -> tuple[str, str]:
    """The tree's full commit, or ``""`` and why it is unknown (a tree from a PyPI sdist that
    states none, or a release recorded from one); never a guess."""
    if want.release is not None and not want.release.commit:
        note = want.release.extra.get("commit_note") or "releases.toml records no commit"
        return "", str(note)
    commit = want.commit
    if material.stated_commit:
        if commit and not material.stated_commit.startswith(commit):
            raise SourceError(
                f"{provider.name} states commit {material.stated_commit}, expected {commit}"
            )
        commit = material.stated_commit
    if len(commit) == 40:
        return commit, ""
    if not commit and material.commit_note:
        return "", material.commit_note
    raise SourceError(
        f"cannot tell the full commit of {want.ref!r} from this material; "
        "pin it in releases.toml or give the full commit"
    )


def _try_provider(
    provider: Provider,
    want: ResolvedRef,
    work: Path,
    trees: Path,
    known: Sequence[Release] = (),
    route: _TagRoute | None = None,
) -> FetchResult:
    material = provider.obtain(want, work)
    commit, commit_note = _commit_of(provider, want, material)
    _log(f"  extracting and verifying {want.ref} ({commit[:12] or 'commit unknown'})")
    tree = _materialise(material, work)
    digest = tree_digest(tree)
    release = _known_release(want, commit, known)
    pin = route.pin if route is not None else None
    expected = release.digest if release is not None else (pin.digest if pin else "")
    if expected and digest != expected:
        raise DigestMismatchError(provider.name, expected, digest)
    source_name = material.source_name or provider.name
    meta = {
        "ref": release.ref if release else want.ref,
        "tag": release.tag if release else want.tag,
        "commit": commit,
        "digest": digest,
        "digest_algorithm": DIGEST_ALGORITHM,
        "provider": source_name,
        "pinned": "true" if release is not None else "false",
        "licenses": licence_status(tree),
    }
    if not commit:
        meta["commit_note"] = commit_note
    if material.dirty:
        _log(f"  taking a clone with uncommitted changes ({material.dirty})")
        meta["dirty"] = material.dirty
    (tree / TREE_METADATA).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    final = trees / (commit or tree_key("", meta["tag"], digest))
    trees.mkdir(parents=True, exist_ok=True)
    if final.exists():
        shutil.rmtree(final)
    os.rename(tree, final)
    if route is not None and pin is None and material.sdist is not None:
        _record_pin(route.path, meta, material.sdist, commit_note, missing_licenses(final))
    return FetchResult(
        final, meta["ref"], meta["tag"], commit, digest, source_name, False, release is not None
    )


def _record_pin(
    path: Path, meta: dict[str, str], sdist: Sdist, commit_note: str, missing: list[str]
) -> None:
    """The first fetch of a build tag from a PyPI sdist: record where and what it was."""
    entry = TagSource(
        tag=meta["tag"],
        package=sdist.package,
        version=sdist.version,
        subdir=sdist.subdir,
        sha256=sdist.sha256,
        digest=meta["digest"],
        digest_algorithm=meta["digest_algorithm"],
        commit="",
        commit_note=commit_note,
        licenses=pin_licences(missing),
    )
    record_tag_source(path, entry)
    _log(f"  recorded {entry.tag} in {path} ({entry.package}=={entry.version}, {entry.digest})")
