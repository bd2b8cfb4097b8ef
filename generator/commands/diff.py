"""``llama-bindgen diff OLD NEW``: API/ABI changes between two releases, classified."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from generator.diff import compare
from generator.diff.report import render_json, render_markdown
from generator.emit import PACKAGE_NAME
from generator.errors import BindgenError, UsageError
from generator.ir import Interface
from generator.platforms import DEFAULT_TARGETS


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "diff",
        help="API/ABI report between two llama.cpp trees, refs or IR files",
        description=(
            "Compare two releases. OLD and NEW may each be a llama.cpp tree, an IR file "
            "(ir.json), a generated llama_bindings/ folder, or a ref (tag or commit) that "
            "`llama-bindgen fetch` can obtain. Prints Markdown; writes JSON with --json. "
            "Exit code 0 either way (see the report's classification), 1 on errors."
        ),
    )
    parser.add_argument("old", help="tree, IR json, generated package folder or ref")
    parser.add_argument("new", help="tree, IR json, generated package folder or ref")
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        help="also write the JSON report here (default: none)",
    )
    parser.add_argument("--markdown", type=Path, default=None, help="also write the Markdown here")
    parser.add_argument(
        "--target",
        action="extend",
        nargs="+",
        default=[],
        metavar="TRIPLE",
        help="extra target triple when parsing trees",
    )
    parser.add_argument(
        "--wrapper",
        choices=("auto", "include", "exclude"),
        default="auto",
        help=(
            "compare the llama_mtp wrapper's declarations too: auto = only when both sides "
            "have them (default)"
        ),
    )
    parser.add_argument(
        "--fail-on-breaking",
        action="store_true",
        help="exit with status 3 when any change is ABI-breaking",
    )
    parser.set_defaults(func=run)


def _parse_tree(tree: Path, targets: tuple[str, ...]) -> Interface:
    # libclang is needed only when a side is a tree; IR files and packages do without it
    from generator.parse.frontend import ParseOptions, parse_interface, tree_source

    options = ParseOptions(tree=tree.resolve(), targets=targets)
    return parse_interface(options, tree_source(tree.resolve(), required=False))


def load_side(spec: str, targets: tuple[str, ...]) -> tuple[Interface, str]:
    """An IR and a label for one side of the diff."""
    path = Path(spec)
    if path.is_file():
        return Interface.load(path), ""
    if path.is_dir():
        if (path / "include" / "llama.h").is_file():
            api = _parse_tree(path, targets)
            return api, "" if api.source.commit else path.name
        if (path / "ir.json").is_file():
            return Interface.load(path / "ir.json"), ""
        if (path / PACKAGE_NAME / "ir.json").is_file():
            return Interface.load(path / PACKAGE_NAME / "ir.json"), ""
        raise UsageError(f"{path} is neither a llama.cpp tree nor a folder holding ir.json")
    if "/" in spec or spec.endswith(".json"):
        raise UsageError(f"{spec}: no such file or folder")
    from generator.sources.fetch import fetch_tree  # only refs need the source layer

    api = _parse_tree(fetch_tree(spec).root, targets)
    return api, spec


def run(args: argparse.Namespace) -> int:
    targets = tuple(dict.fromkeys([*DEFAULT_TARGETS, *args.target]))
    print(f"diff: loading {args.old}", file=sys.stderr)
    old, old_label = load_side(args.old, targets)
    print(f"diff: loading {args.new}", file=sys.stderr)
    new, new_label = load_side(args.new, targets)
    result = compare(old, new, old_label, new_label, wrapper=args.wrapper)
    markdown = render_markdown(result)
    try:
        if args.json is not None:
            args.json.write_text(render_json(result), encoding="utf-8")
            print(f"diff: JSON report written to {args.json}", file=sys.stderr)
        if args.markdown is not None:
            args.markdown.write_text(markdown, encoding="utf-8")
    except OSError as exc:
        raise BindgenError(f"cannot write the report: {exc}") from exc
    sys.stdout.write(markdown)
    if args.fail_on_breaking and result.breaking:
        return 3
    return 0
