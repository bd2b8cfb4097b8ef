"""The ``llama-bindgen`` command line: one sub-command per module in ``generator.commands``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from generator import __version__
from generator.errors import BindgenError

# Each module defines ``register(subparsers)``, which adds its parser and sets ``func``.
COMMAND_MODULES: tuple[str, ...] = (
    "generator.commands.build",
    "generator.commands.bump",
    "generator.commands.diff",
    "generator.commands.fetch",
    "generator.commands.generate",
    "generator.commands.make_test_model",
    "generator.commands.matrix",
    "generator.commands.release",
    "generator.commands.smoke",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llama-bindgen",
        description="Fetch, parse, bind, build and verify llama.cpp releases.",
    )
    parser.add_argument("--version", action="version", version=f"llama-bindgen {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
    except BindgenError as exc:
        print(f"llama-bindgen {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"llama-bindgen {args.command}: interrupted", file=sys.stderr)
        return 130
    return result


if __name__ == "__main__":
    sys.exit(main())
