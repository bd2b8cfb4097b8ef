"""One source folder per platform, so that one compiler cache serves every tree and backend.

ccache finds a compilation's result by its command line and its inputs' contents (in direct mode:
the source and every header it read, by path and content; otherwise the preprocessed text, whose
line markers carry the paths). Paths under ``CCACHE_BASEDIR`` are rewritten relative to the
compiler's working folder. Trees are extracted at ``<cache>/trees/<key>``, so the relative path
from a build folder to a tree's files names the tree, and no object of one tag was ever found for
the next: every new tag was a cold build.

So every build of a platform, whatever its backend, compiles its tree from one folder,
``<cache>/stage/<platform>/llama.cpp``, remade for each build as a copy of the tree made of hard
links (plain copies where the file system refuses links; both keep each file's modification
time). With ``CCACHE_BASEDIR`` at the cache folder, the paths ccache sees
(``../../../stage/<platform>/llama.cpp/ggml/src/ggml.c`` from ``<cache>/build/<name>/cmake``) are
the same for every tree, and an object whose source and headers did not change since any earlier tag
is taken from the cache. A changed header changes the contents ccache hashes, so whatever includes
it is compiled again; no ``sloppiness`` is set that would let a change pass unseen.

ccache's direct mode (it hashes the command line and the headers a compilation read, without
running the preprocessor) cannot see a header that a newer tree adds earlier in the include path
(a ``two.h`` beside the source, shadowing ``include/two.h``): between trees it would hand out the
old object. So every compile command names its tree (``tree_id``, a ``-D`` that no source reads):
direct mode then serves a tree only its own objects (a rebuild of the same tree), and between trees
ccache goes through its preprocessor mode, which hashes the preprocessed text (every header as
the compiler found it, ``-D`` options left out) and shares exactly the objects whose text is the
same.

The wrapper's CMake project (``generator/native_wrapper/``) is staged too, copied to
``<cache>/stage/<platform>/native_wrapper`` under the same lock, and configured from there: its
sources and its include folder (which the common/ subset it compiles sees) then have the same
paths whichever checkout builds (a clean clone, the GPU check's kit, a copy made by a test), so
the objects of one checkout serve every other, where the checkout's own folder would have named
it in every command line of the wrapper's target. One build folder then serves every checkout
of the same wrapper sources; the staged files keep the checkout's times, and a build folder
whose last build used other contents sees them all as changed (``mark_changed``).

CMake's build folder stays one per tree (``build.build_dir_for``): Ninja's timestamps only ever
compare a tree's objects with that same tree's files (the links keep the files' times), and what
one tree shares with another comes from ccache's content hashes alone. The links share their
files with the fetched tree, so nothing may write into the folder: llama.cpp's CMake and the
wrapper's write only into the build folder (``configure_file`` and ``file(WRITE)`` included).

The folder is one per platform, so two builds of it (of any backends) cannot both use it: a
lock file beside it (``<cache>/stage/<platform>.lock``) is held from the copy until the build has
installed. A second build of the same platform waits, saying so on stderr, until the first is
done (the operating system drops the lock of a process that ended, however it ended); builds of
other platforms run side by side. A half-made copy is never trusted: each build makes the copy anew.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from generator.native.cmake_driver import progress

STAGE_FOLDER = "stage"
WRAPPER_FOLDER = "native_wrapper"
# Not a folder name found inside a tree ("src", "include", ...): the compiler's paths into the
# tree pass through it, and build.first_wrapper_error reads a path from the last of those names.
TREE_FOLDER = "llama.cpp"


def tree_id(tree_root: Path, digest: str) -> str:
    """The name of a tree in its compile commands (the wrapper project's ``LLAMA_BINDGEN_TREE_ID``
    definition, which no source reads): ccache's direct mode hashes the command line, so what it
    records serves that tree alone, while its preprocessor mode, which leaves ``-D`` options out
    of its hash, shares an object between trees wherever the preprocessed text is the same."""
    return hashlib.sha256(f"{tree_root}\0{digest}".encode()).hexdigest()[:16]


def stage_dir(cache: Path, key: str) -> Path:
    """Where every tree of the platform ``key`` is compiled, whatever the backend."""
    return cache / STAGE_FOLDER / key / TREE_FOLDER


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system, or one without hard links
        shutil.copy2(src, dst)


def staged_wrapper_dir(cache: Path, key: str) -> Path:
    """Where the wrapper's CMake project of the platform ``key`` is configured from."""
    return cache / STAGE_FOLDER / key / WRAPPER_FOLDER


def folder_digest(folder: Path) -> str:
    """One digest over the files of ``folder`` (their paths inside it and their contents)."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def mark_changed(folder: Path, record: Path) -> str:
    """Give ``folder``'s files the time now when their contents are not those ``record`` holds
    (written after the last build that used them, :func:`record_contents`): a checkout's files
    keep their own times when staged, and a file older than the objects a build folder made from
    another checkout's version would look up to date to Ninja. Unchanged files keep their times,
    so an unchanged project is not configured again. Returns the contents' digest."""
    digest = folder_digest(folder)
    if record.is_file() and record.read_text(encoding="utf-8").strip() == digest:
        return digest
    for path in folder.rglob("*"):
        if path.is_file():
            os.utime(path)
    return digest


def record_contents(record: Path, digest: str) -> None:
    """``digest`` (:func:`mark_changed`'s) as the contents a build folder last built with."""
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(digest + "\n", encoding="utf-8")


def _remove(dest: Path) -> None:
    if dest.is_symlink() or dest.is_file():
        dest.unlink()
    elif dest.exists():
        shutil.rmtree(dest)


def stage_tree(tree_root: Path, dest: Path) -> None:
    """Make ``dest`` a copy of ``tree_root`` made of hard links (symbolic links kept as links)."""
    _remove(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(tree_root, dest, symlinks=True, copy_function=_link_or_copy)


if sys.platform == "win32":
    import msvcrt

    def _try_lock(fh: IO[bytes]) -> bool:
        try:
            msvcrt.locking(fh.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _lock(fh: IO[bytes]) -> None:
        while not _try_lock(fh):
            time.sleep(1)

    def _unlock(fh: IO[bytes]) -> None:
        msvcrt.locking(fh.fileno(), msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fh: IO[bytes]) -> bool:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _lock(fh: IO[bytes]) -> None:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)

    def _unlock(fh: IO[bytes]) -> None:
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


@contextmanager
def exclusive(lock_path: Path, label: str) -> Iterator[None]:
    """Hold the lock file ``lock_path``; when another process holds it, say so and wait."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a+b") as fh:
        if not _try_lock(fh):
            progress(f"{label}: waiting for another build holding {lock_path}")
            started = time.monotonic()
            _lock(fh)
            progress(f"{label}: lock taken after {time.monotonic() - started:.0f} s")
        try:
            yield
        finally:
            _unlock(fh)


@contextmanager
def staged_source(
    tree_root: Path, cache: Path, key: str, label: str, wrapper: Path | None = None
) -> Iterator[Path]:
    """The stable folder of ``key`` holding ``tree_root``'s files, and ``wrapper``'s (the
    wrapper's CMake project, copied: a checkout's files are not linked into the cache) at
    :func:`staged_wrapper_dir`, for as long as the block runs (no other build of ``key`` uses
    them meanwhile)."""
    dest = stage_dir(cache, key)
    with exclusive(dest.parent.with_name(f"{key}.lock"), label):
        stage_tree(tree_root, dest)
        if wrapper is not None:
            staged = staged_wrapper_dir(cache, key)
            _remove(staged)
            shutil.copytree(wrapper, staged, symlinks=True)
        yield dest
