"""Debian packages fetched with the host's own apt into a private folder, then unpacked.

Used where a build or a gate needs files from Debian packages that are not (or cannot be)
installed on the host: Debian 13's Vulkan headers on Debian 12, Debian's arm64 Python for the
smoke under qemu. apt runs with its state (lists, cache) in ``<folder>/apt``, so nothing of the
host's apt is touched and no root lock is taken; the host's apt configuration (mirror, proxy)
still applies. The ``.deb`` files are unpacked with ``dpkg -x`` and removed with the apt state.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from generator.errors import BindgenError


class DebFetchError(BindgenError):
    """apt or dpkg failed, or is missing."""

    exit_code = 3


def _run(argv: list[str], what: str, cwd: Path, error: type[BindgenError]) -> None:
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = " / ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise error(f"{what} failed ({proc.returncode}): {tail}")


def fetch_and_unpack(
    folder: Path,
    packages: Sequence[str],
    root: Path,
    *,
    what: str,
    apt_options: Sequence[str] = (),
    sources: str | None = None,
    error: type[BindgenError] = DebFetchError,
    progress: Callable[[str], None] | None = None,
) -> list[str]:
    """Download ``packages`` with a private apt state under ``folder`` and unpack them into
    ``root``; returns the unpacked files' names. ``sources``: a deb822 sources text used instead
    of the host's lists; ``apt_options``: more ``-o`` options (an architecture); ``what`` names the
    packages in messages; ``error``: the caller's error type."""
    missing = [tool for tool in ("apt-get", "dpkg") if shutil.which(tool) is None]
    if missing:
        raise error(f"fetching {what} needs {' and '.join(missing)}")
    say = progress or (lambda _message: None)
    apt = folder / "apt"
    (apt / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (apt / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    options = [*apt_options]
    if sources is not None:
        parts = apt / "sources"
        parts.mkdir(exist_ok=True)
        (parts / "private.sources").write_text(sources, encoding="utf-8")
        options += ["-o", "Dir::Etc::SourceList=/dev/null", "-o", f"Dir::Etc::SourceParts={parts}"]
    options += [
        "-o", f"Dir::State::Lists={apt / 'lists'}",
        "-o", f"Dir::Cache={apt / 'cache'}",
        "-o", "Debug::NoLocking=1",
        "-o", "APT::Sandbox::User=root",
    ]  # fmt: skip
    debs = folder / "debs"
    debs.mkdir(exist_ok=True)
    say(f"apt-get update (package lists for {what}, private state folder)")
    _run(["apt-get", *options, "update"], f"apt-get update for {what}", folder, error)
    say(f"downloading {len(packages)} package(s): {what}")
    _run(["apt-get", *options, "download", *packages], f"apt-get download of {what}", debs, error)
    files = sorted(debs.glob("*.deb"))
    root.mkdir(parents=True, exist_ok=True)
    say(f"unpacking {len(files)} package(s) into {root}")
    for deb in files:
        _run(["dpkg", "-x", str(deb), str(root)], f"dpkg -x {deb.name}", folder, error)
    shutil.rmtree(debs)
    shutil.rmtree(apt)
    return [deb.name for deb in files]
