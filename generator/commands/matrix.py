"""``llama-bindgen matrix``: emit the CI workflows: ``.github/workflows/release.yml`` (the release
matrix) and, beside it, ``track-upstream.yml`` (the daily bump of a new upstream tag).

``--check`` writes nothing and exits 1 when a committed file differs from what would be emitted.
The last stdout line is the release workflow's path.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from generator.release.ci_matrix import ci_jobs
from generator.release.workflow import (
    TRACK_WORKFLOW_NAME,
    default_workflow_path,
    render_track_workflow,
    render_workflow,
)


def _write(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` when it differs; whether it did."""
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    tmp.replace(path)
    return True


def run(args: argparse.Namespace) -> int:
    path: Path = args.output or default_workflow_path()
    files = [
        (path.parent / TRACK_WORKFLOW_NAME, render_track_workflow()),
        (path, render_workflow()),
    ]
    if args.check:
        stale = [p for p, text in files if not p.is_file() or p.read_text(encoding="utf-8") != text]
        for p in stale:
            print(f"{p} differs from `llama-bindgen matrix`; run it to update", file=sys.stderr)
        if stale:
            return 1
        print(f"up to date: {len(ci_jobs())} matrix jobs, and {TRACK_WORKFLOW_NAME}")
        print(path)
        return 0
    for p, text in files:
        print(f"{'wrote' if _write(p, text) else 'unchanged'}: {p.name}")
    print(f"{len(ci_jobs())} matrix jobs")
    print(path)
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "matrix",
        help="emit the CI workflows (release matrix, upstream tracking)",
        description=(
            "Render .github/workflows/release.yml (one job per platform and backend: build, "
            "tests, smoke where the runner can run the binaries, and a final job that verifies "
            "the artifacts, packs the release and publishes it) and, beside it, "
            f"{TRACK_WORKFLOW_NAME} (daily: bump a newer upstream tag and open or update its pull "
            "request, or its issue when a gate fails)."
        ),
    )
    parser.add_argument(
        "--output", type=Path, default=None, help="where to write the release workflow"
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if a file differs; write nothing"
    )
    parser.set_defaults(func=run)
