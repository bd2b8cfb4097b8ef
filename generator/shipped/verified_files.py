"""Remember which library files already matched their build record, so a load hashes them once.

:func:`abi_guard.check_build_files` ties every library file to the sha256 its build's
``build-info.json`` records. Hashing some 9 MB of libraries is most of what ``load()`` costs, and
the answer only changes when a file does. So after a successful check a *seal* is written: one
line naming the build record and every checked file by path and file identity (device, inode,
size, modification and change time in nanoseconds, as ``os.stat`` gives them). A later load
whose files all have the same identities skips the hashing; a file replaced, rewritten, touched
or moved in changes its identity, and is hashed (and refused if it does not match) again. Git's
index trusts the same fields to find changed files.

The seals live in one small text file, ``verified-libraries-v1.txt``, in the per-user cache
folder (``$LLAMA_BINDGEN_CACHE`` if set, else ``$XDG_CACHE_HOME/llama-bindgen`` where that is
set, else ``~/.cache/llama-bindgen`` on Linux, ``~/Library/Caches/llama-bindgen`` on macOS,
``%LOCALAPPDATA%\\llama-bindgen\\llama-bindgen\\Cache`` on Windows: the folders the tool's own
cache uses). ``$LLAMA_BINDGEN_VERIFIED_CACHE`` names another file, or ``off`` hashes at every
load. The cache is an optimisation only: a file that cannot be read or written is ignored, and
every load then hashes as before.
"""

from __future__ import annotations

import os
import sys

# ``typing`` and ``pathlib`` are not imported here: this runs on every ``load()``, and only
# type checkers need them (mypy takes any ``TYPE_CHECKING`` as true).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

CACHE_ENV = "LLAMA_BINDGEN_CACHE"
FILE_ENV = "LLAMA_BINDGEN_VERIFIED_CACHE"
FILE_NAME = "verified-libraries-v1.txt"
OFF = "off"
KEEP = 64  # seals kept, newest last; older ones are dropped when a new one is written


def cache_dir() -> str:
    """llama-bindgen's per-user cache folder: ``$LLAMA_BINDGEN_CACHE`` if set, else the
    platform's (platformdirs' layout). The one home of this rule: the tool's own cache
    (``generator.paths.default_cache_dir``) is this folder too."""
    folder = os.environ.get(CACHE_ENV)
    if not folder:
        if sys.platform == "win32":
            local = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
            # platformdirs' layout with no app author (LOCALAPPDATA\author\app\Cache): the
            # author defaults to the app's name
            folder = os.path.join(local, "llama-bindgen", "llama-bindgen", "Cache")
        else:  # platformdirs honours $XDG_CACHE_HOME on macOS too
            home_cache = "~/Library/Caches" if sys.platform == "darwin" else "~/.cache"
            base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser(home_cache)
            folder = os.path.join(base, "llama-bindgen")
    return os.path.expanduser(folder)


def cache_file() -> str | None:
    """The seal file's path, or None when the cache is off."""
    chosen = os.environ.get(FILE_ENV)
    if chosen is not None:
        return None if chosen.strip().lower() in ("", OFF) else os.path.expanduser(chosen)
    return os.path.join(cache_dir(), FILE_NAME)


def _identity(path: Path | str) -> str:
    st = os.stat(path)
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def seal(build_info: Path, files: Sequence[Path]) -> str | None:
    """One line that names ``build_info`` and ``files`` (real paths) with their identities, or
    None when it cannot be written as one line (a path with a tab or a line break, a file that
    cannot be stat'ed: such loads are simply hashed)."""
    try:
        parts = [f"{p}\t{_identity(p)}" for p in (build_info, *sorted(files, key=str))]
    except OSError:
        return None
    line = "\t".join(parts)
    return None if "\n" in line or "\r" in line or line.count("\t") != 2 * len(parts) - 1 else line


def _read(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return []


def is_sealed(line: str | None) -> bool:
    """Whether ``line`` (from :func:`seal`) was recorded by an earlier successful check."""
    path = cache_file()
    return line is not None and path is not None and line in _read(path)


def record(line: str | None) -> None:
    """Remember ``line`` after a successful check (best effort, atomic replace)."""
    path = cache_file()
    if line is None or path is None:
        return
    kept = [old for old in _read(path) if old and old != line][-(KEEP - 1) :]
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(temporary, "w", encoding="utf-8") as fh:
            fh.write("\n".join([*kept, line]) + "\n")
        os.replace(temporary, path)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass
