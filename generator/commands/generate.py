"""``llama-bindgen generate``: parse a llama.cpp tree and emit ``generated/llama_bindings/``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from generator.emit import PACKAGE_NAME, emit_package
from generator.paths import checkout_generated
from generator.platforms import DEFAULT_TARGETS
from generator.sources.licenses import llama_license


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "generate",
        help="parse llama.h (+ the MTP wrapper header) and emit the typed cffi bindings",
        description=(
            "Parse include/llama.h of a verified llama.cpp tree with libclang, once per target "
            f"triple, and write {PACKAGE_NAME}/ (cdef, enums, stubs, constants, ABI manifest, "
            "IR, loader, generation report). Nothing is written unless every step succeeds."
        ),
    )
    parser.add_argument("--tree", type=Path, required=True, help="llama.cpp source tree")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=(
            f"output folder (default: generated/ of the checkout); {PACKAGE_NAME}/ is "
            "replaced inside it"
        ),
    )
    parser.add_argument(
        "--target",
        action="extend",
        nargs="+",
        default=[],
        metavar="TRIPLE",
        help=f"extra target triple for layouts (always: {', '.join(DEFAULT_TARGETS)})",
    )
    wrapper = parser.add_mutually_exclusive_group()
    wrapper.add_argument(
        "--wrapper-header",
        type=Path,
        default=None,
        help=(
            "MTP wrapper header (default: the llama_mtp.h shipped with this tool, when the "
            "tree has the MTP API)"
        ),
    )
    wrapper.add_argument(
        "--no-wrapper", action="store_true", help="bind llama.cpp only, without the MTP wrapper"
    )
    parser.add_argument("--tag", default=None, help="override the tree metadata's tag")
    parser.add_argument("--commit", default=None, help="override the tree metadata's commit")
    parser.set_defaults(func=run)


def wrapper_header_for(args: argparse.Namespace) -> Path | None:
    from generator.parse.frontend import default_wrapper_header

    if getattr(args, "no_wrapper", False):
        return None
    if args.wrapper_header is not None:
        path: Path = args.wrapper_header.resolve()
        return path
    return default_wrapper_header(args.tree.resolve())


def run(args: argparse.Namespace) -> int:
    from generator.parse.frontend import ParseOptions, parse_interface, tree_source

    tree: Path = args.tree.resolve()
    out: Path = (args.out or checkout_generated("generate without --out")).resolve()
    source = tree_source(tree, args.tag, args.commit)
    options = ParseOptions(
        tree=tree,
        wrapper_header=wrapper_header_for(args),
        targets=tuple(dict.fromkeys([*DEFAULT_TARGETS, *args.target])),
    )
    api = parse_interface(options, source, progress=True)
    result = emit_package(api, out, llama_license=llama_license(tree))
    print(
        f"generate: {len(result.cdef.bound_functions)} functions, "
        f"{len(api.records)} structs/unions, {len(api.enums)} enums, "
        f"{len(api.constants)} constants for {len(api.targets)} targets; "
        f"{len(result.unsupported)} declarations not bound (see GENERATION_REPORT.md)",
        file=sys.stderr,
    )
    print(result.package_dir)
    return 0
