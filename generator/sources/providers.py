"""Providers: the places a llama.cpp tree can come from, each yielding an archive or a folder.

A provider only obtains material; verification (content digest) and the move into the cache are
the fetcher's job, so every provider is held to the same pin.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from generator.errors import SourceError
from generator.hashing import file_sha256
from generator.releases import ResolvedRef, Sdist
from generator.sources.download import download, make_session

GITHUB_BASE_URL = "https://github.com"
UPSTREAM_REPO = "ggml-org/llama.cpp"


@dataclass(frozen=True)
class Material:
    """What a provider produced: an archive (with the folder inside it holding the tree, found
    later) or a folder on disk; plus the commit the material itself states, when it states one."""

    archive: Path | None = None
    folder: Path | None = None
    stated_commit: str = ""
    dirty: str = ""  # for a clone taken with uncommitted changes: what changed


class Provider(Protocol):
    @property
    def name(self) -> str: ...

    def obtain(self, want: ResolvedRef, workdir: Path) -> Material: ...


def archive_url(base_url: str, want: ResolvedRef) -> str:
    """GitHub's archive URL layout: ``/OWNER/REPO/archive/<commit>.tar.gz`` or
    ``/OWNER/REPO/archive/refs/tags/<tag>.tar.gz``."""
    base = base_url.rstrip("/")
    if want.commit:
        return f"{base}/{UPSTREAM_REPO}/archive/{want.commit}.tar.gz"
    return f"{base}/{UPSTREAM_REPO}/archive/refs/tags/{want.tag}.tar.gz"


@dataclass(frozen=True)
class ArchiveProvider:
    """The GitHub archive of a tag or commit, or a mirror with the same URL layout."""

    base_url: str
    label: str

    @property
    def name(self) -> str:
        return f"{self.label} ({self.base_url})"

    def obtain(self, want: ResolvedRef, workdir: Path) -> Material:
        url = archive_url(self.base_url, want)
        print(f"  downloading {url}", file=sys.stderr)
        dest = download(url, workdir / "archive.tar.gz", make_session())
        from generator.sources.extract import pax_commit

        return Material(archive=dest, stated_commit=pax_commit(dest))


@dataclass(frozen=True)
class LocalProvider:
    """A local folder holding a tree, or a tarball (GitHub archive, sdist or plain tar).

    A git clone states its own commit (HEAD); a clone with uncommitted changes is refused unless
    ``allow_dirty``, and a tag asked for must name the clone's HEAD."""

    path: Path
    allow_dirty: bool = False

    @property
    def name(self) -> str:
        return f"local source ({self.path})"

    def obtain(self, want: ResolvedRef, workdir: Path) -> Material:
        from generator.sources.git_clone import is_clone_top

        if self.path.is_dir() and is_clone_top(self.path):
            return self._from_clone(want)
        if self.path.is_dir():
            return Material(folder=self.path)
        if self.path.is_file():
            from generator.sources.extract import pax_commit

            return Material(archive=self.path, stated_commit=pax_commit(self.path))
        raise SourceError(f"{self.path}: no such file or folder")

    def _from_clone(self, want: ResolvedRef) -> Material:
        from generator.sources.git_clone import read_clone, tag_commit

        state = read_clone(self.path)
        if state.dirty and not self.allow_dirty:
            raise SourceError(
                f"git clone {state.folder} has uncommitted changes ({state.describe_changes()}); "
                "commit or stash them, or pass --allow-dirty to take the tree as it is"
            )
        if want.tag and not want.commit:
            named = tag_commit(state.folder, want.tag)
            if named is None:
                raise SourceError(
                    f"git clone {state.folder} has no tag {want.tag}: fetch its tags "
                    f"(git fetch --tags) or give the commit instead of the tag"
                )
            if named != state.commit:
                raise SourceError(
                    f"tag {want.tag} is commit {named} but the clone {state.folder} has "
                    f"{state.commit} checked out: git checkout {want.tag}"
                )
        return Material(
            folder=state.folder,
            stated_commit=state.commit,
            dirty=state.describe_changes() if state.dirty else "",
        )


@dataclass(frozen=True)
class SdistProvider:
    """A PyPI sdist that vendors the tree, fetched with pip (which honours the user's index and
    proxy settings) and checked against the sdist's pinned sha256."""

    sdist: Sdist
    download_dir: Path

    @property
    def name(self) -> str:
        return f"PyPI sdist {self.sdist.requirement}"

    def _cached(self) -> Path | None:
        stem = self.sdist.package.replace("-", "_")
        for candidate in sorted(self.download_dir.glob(f"{stem}-{self.sdist.version}.tar.gz")):
            return candidate
        return None

    def obtain(self, want: ResolvedRef, workdir: Path) -> Material:
        cached = self._cached()
        if cached is not None and file_sha256(cached) != self.sdist.sha256:
            print(f"  cached {cached.name} has the wrong sha256; fetching again", file=sys.stderr)
            cached.unlink()
            cached = None
        if cached is None:
            print(f"  pip download {self.sdist.requirement} (sdist)", file=sys.stderr)
            fetch_dir = workdir / "pip"
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--disable-pip-version-check",
                "-d",
                str(fetch_dir),
                self.sdist.requirement,
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
                raise SourceError(f"pip download {self.sdist.requirement} failed: {tail[0]}")
            found = sorted(fetch_dir.glob("*.tar.gz"))
            if not found:
                raise SourceError(f"pip download {self.sdist.requirement} produced no sdist")
            got = file_sha256(found[0])
            if got != self.sdist.sha256:
                raise SourceError(
                    f"{found[0].name}: sha256 mismatch: expected {self.sdist.sha256}, got {got}"
                )
            self.download_dir.mkdir(parents=True, exist_ok=True)
            cached = self.download_dir / found[0].name
            shutil.move(found[0], cached)
        else:
            print(f"  using cached {cached.name}", file=sys.stderr)
        return Material(archive=cached)
