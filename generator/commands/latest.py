"""``llama-bindgen latest``: llama.cpp's newest release tag and commit, against the pin."""

from __future__ import annotations

import argparse
import json
from typing import Any

from generator.github_api import DEFAULT_API_URL, TOKEN_ENV, optional_token
from generator.releases import load_document
from generator.tracking import UPSTREAM, TrackingClient, is_newer


def run(args: argparse.Namespace) -> int:
    pinned = str(load_document().get("pinned", ""))
    client = TrackingClient(optional_token(), args.api_url)
    latest = client.latest(args.upstream)
    newer = is_newer(latest.tag, pinned)
    if newer is None:  # not both build tags: a different tag counts as new
        newer = latest.tag != pinned
    if args.json:
        record = {"tag": latest.tag, "commit": latest.commit, "pinned": pinned, "newer": newer}
        print(json.dumps(record, sort_keys=True))
        return 0
    if latest.tag == pinned:
        said = "the pinned release"
    else:
        said = f"{'newer than' if newer else 'not newer than'} the pin {pinned or '(none)'}"
    print(f"{latest.tag} {latest.commit}: {said}")
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "latest",
        help="the newest upstream release tag, and whether it is newer than the pin",
        description=(
            "Ask GitHub's REST API for llama.cpp's newest release tag and its commit and compare "
            f"it with releases.toml's pin. ${TOKEN_ENV}, when set, raises the rate limit; it is "
            "sent in the Authorization header only and never printed."
        ),
    )
    parser.add_argument("--upstream", default=UPSTREAM, help="OWNER/NAME (%(default)s)")
    parser.add_argument("--api-url", default=DEFAULT_API_URL, help="GitHub API base URL")
    parser.add_argument(
        "--json", action="store_true", help="print {tag, commit, pinned, newer} as JSON"
    )
    parser.set_defaults(func=run)
