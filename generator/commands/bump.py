"""``llama-bindgen bump REF``: move the project to a llama.cpp release through every stage.

Stages run in pipeline order; each prints progress and a summary line. Stages that have not
landed yet are listed as such at the end: the bump then stops without touching ``generated/``
or ``releases.toml`` and says so (exit code 0: nothing failed, nothing was published).
"""

from __future__ import annotations

import argparse
from typing import Any

from generator.commands.fetch import add_source_options, github_base
from generator.sources.fetch import fetch_tree

# Pipeline stages after fetch that a complete bump runs (ARCHITECTURE.md, "Pipeline").
PENDING_STAGES: tuple[str, ...] = (
    "generate",
    "diff",
    "build",
    "verify (symbols, layouts, MTP smoke)",
    "record release",
)


def run(args: argparse.Namespace) -> int:
    print(f"[1/1] fetch {args.ref}", flush=True)
    result = fetch_tree(
        args.ref, args.cache, mirror=args.mirror, source=args.source, github_base=github_base(args)
    )
    state = "cache" if result.from_cache else result.provider
    print(f"      tree {result.tree} (commit {result.commit}, {result.digest}, from {state})")
    print(
        "bump stopped after the fetch stage: not implemented yet: "
        + ", ".join(PENDING_STAGES)
        + ". generated/ and releases.toml are unchanged."
    )
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bump",
        help="bump the bindings to a llama.cpp release (fetch, generate, build, verify, record)",
    )
    parser.add_argument("ref", metavar="REF")
    add_source_options(parser)
    parser.set_defaults(func=run)
