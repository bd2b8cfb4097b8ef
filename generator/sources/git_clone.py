"""Reading a local git clone given as ``--source``: its commit, whether it is clean, its tags.

Only a folder that is itself the top of a git work tree counts as a clone (a llama.cpp copy
inside some other repository is a plain folder). git runs with ``safe.directory`` set for that
one folder, so a clone owned by another user can still be read.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from generator.errors import SourceError

DIRTY_SHOWN = 5  # changed paths named in an error


@dataclass(frozen=True)
class CloneState:
    folder: Path
    commit: str  # HEAD, 40 hex digits
    changed: tuple[str, ...]  # `git status --porcelain` paths (tracked changes and untracked)

    @property
    def dirty(self) -> bool:
        return bool(self.changed)

    def describe_changes(self) -> str:
        shown = ", ".join(self.changed[:DIRTY_SHOWN])
        more = len(self.changed) - DIRTY_SHOWN
        return f"{len(self.changed)} changed path(s): {shown}" + (
            f" and {more} more" if more > 0 else ""
        )


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    git = shutil.which("git")
    if git is None:
        raise SourceError(f"{folder} is a git clone but git is not installed (apt-get install git)")
    return subprocess.run(
        [git, "-c", f"safe.directory={folder}", "-C", str(folder), *args],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def is_clone_top(folder: Path) -> bool:
    """True when ``folder`` is the top of a git work tree (``.git`` folder or worktree file)."""
    return (folder / ".git").exists()


def read_clone(folder: Path) -> CloneState:
    folder = folder.resolve()
    head = _git(folder, "rev-parse", "--verify", "HEAD^{commit}")
    if head.returncode != 0:
        raise SourceError(f"{folder}: cannot read the clone's commit: {head.stderr.strip()}")
    status = _git(folder, "status", "--porcelain", "--untracked-files=normal")
    if status.returncode != 0:
        raise SourceError(f"{folder}: git status failed: {status.stderr.strip()}")
    changed = tuple(line[3:] for line in status.stdout.splitlines() if line.strip())
    return CloneState(folder, head.stdout.strip(), changed)


def tag_commit(folder: Path, tag: str) -> str | None:
    """The commit ``tag`` names in the clone, or None when the clone has no such tag."""
    proc = _git(folder.resolve(), "rev-parse", "--verify", "-q", f"refs/tags/{tag}^{{commit}}")
    return proc.stdout.strip() if proc.returncode == 0 else None
