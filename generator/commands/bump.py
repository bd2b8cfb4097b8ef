"""``llama-bindgen bump REF``: move the project to a llama.cpp release through every stage.

fetch -> generate -> diff -> build -> verify (symbols, layout, smoke) -> record. The repository
(generated/, releases.toml, CHANGELOG.md, reports/) changes only when every gate of every platform
built here passed; otherwise the failing gates are named with the paths of their logs.
"""

from __future__ import annotations

import argparse
from typing import Any

from generator.commands.fetch import add_source_options, github_base
from generator.paths import checkout_root


def run(args: argparse.Namespace) -> int:
    from generator.bump.pipeline import BumpOptions, run_bump  # heavy: imported when bumping

    report = run_bump(
        BumpOptions(
            ref=args.ref,
            repo=checkout_root("bump"),
            cache=args.cache,
            mirror=args.mirror,
            source=args.source,
            allow_dirty=args.allow_dirty,
            github_base=github_base(args),
            platforms=tuple(args.platform or ()),
        )
    )
    print(f"pinned {report.fetched.ref} ({report.fetched.commit_label}); work folder {report.work}")
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bump",
        help="bump the bindings to a llama.cpp release (fetch, generate, build, verify, record)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("ref", metavar="REF")
    parser.add_argument(
        "--platform",
        action="append",
        metavar="P",
        help="build and verify only this platform, or platform-backend such as "
        "linux-x86_64-vulkan (repeatable; default: every platform and GPU backend whose "
        "toolchain is installed)",
    )
    add_source_options(parser)
    parser.set_defaults(func=run)
