"""``llama-bindgen compat TAG ...``: run a bump's gates on upstream tags without pinning them.

Each tag is fetched (a pinned release, else the PyPI sdist tag-sources.toml records or finds),
its own bindings are generated into a work folder, and build, symbols, layout and smoke run on
each platform asked for (default: linux-x86_64). The results are merged into
reports/compat.json and the documentation's compatibility table is rendered from them. Exit 1 when a
tag did not pass every gate (the results say which gate, with its log). --check (CI) writes
nothing and also fails when a tag's results differ from the recorded ones.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from generator.errors import UsageError
from generator.paths import checkout_root
from generator.platforms import REFERENCE_PLATFORM
from generator.releases import is_build_tag


def run(args: argparse.Namespace) -> int:
    from generator.bump.compat import CompatOptions, run_compat  # heavy: imported when checking

    bad = [tag for tag in args.tags if not is_build_tag(tag)]
    if bad:
        raise UsageError(f"not an upstream build tag (bN): {', '.join(bad)}")
    if args.results is not None and args.results.is_dir():
        raise UsageError(f"--results {args.results} is a folder; give the JSON file to write")
    results = run_compat(
        CompatOptions(
            tags=tuple(dict.fromkeys(args.tags)),
            repo=checkout_root("compat"),
            platforms=tuple(args.platform or (REFERENCE_PLATFORM,)),
            cache=args.cache,
            results=args.results,
            table=not args.no_table,
            check=args.check,
        )
    )
    passed = [tag for tag in args.tags if results[tag].passed]
    print(f"compat: {len(passed)} of {len(set(args.tags))} tags passed every gate")
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "compat",
        help="run the bump gates on upstream tags without pinning them (reports/compat.json)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("tags", nargs="+", metavar="TAG", help="upstream tags such as b9246")
    parser.add_argument(
        "--platform",
        action="append",
        metavar="P",
        help=f"platform or platform-backend to gate on (repeatable; default {REFERENCE_PLATFORM})",
    )
    parser.add_argument("--cache", type=Path, default=None, help="cache folder")
    parser.add_argument(
        "--results", type=Path, default=None, help="results file (default reports/compat.json)"
    )
    parser.add_argument(
        "--no-table",
        "--no-readme",  # its name before the table moved to the documentation
        dest="no_table",
        action="store_true",
        help="do not re-render the table of docs/reference/compat.md",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; fail unless every tag passes and its results equal the recorded ones",
    )
    parser.set_defaults(func=run)
