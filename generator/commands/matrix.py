"""``llama-bindgen matrix``: emit the release CI workflow (``.github/workflows/release.yml``).

``--check`` writes nothing and exits 1 when the committed file differs from what would be emitted.
The last stdout line is the workflow's path.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from generator.release.ci_matrix import ci_jobs
from generator.release.workflow import default_workflow_path, render_workflow


def run(args: argparse.Namespace) -> int:
    path: Path = args.output or default_workflow_path()
    text = render_workflow()
    current = path.read_text(encoding="utf-8") if path.is_file() else None
    if args.check:
        if current != text:
            print(f"{path} differs from `llama-bindgen matrix`; run it to update", file=sys.stderr)
            return 1
        print(f"up to date: {len(ci_jobs())} matrix jobs")
        print(path)
        return 0
    if current != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8", newline="\n")
        tmp.replace(path)
    print(f"{'unchanged' if current == text else 'wrote'}: {len(ci_jobs())} matrix jobs")
    print(path)
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "matrix",
        help="emit the release CI workflow",
        description=(
            "Render .github/workflows/release.yml: one job per platform and backend (build, "
            "tests, smoke where the runner can run the binaries) and a final job that verifies "
            "the artifacts, packs the release and publishes it."
        ),
    )
    parser.add_argument("--output", type=Path, default=None, help="where to write the workflow")
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the file differs; write nothing"
    )
    parser.set_defaults(func=run)
