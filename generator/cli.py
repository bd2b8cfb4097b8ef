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
    "generator.commands.gates",
    "generator.commands.generate",
    "generator.commands.make_test_model",
    "generator.commands.matrix",
    "generator.commands.release",
    "generator.commands.smoke",
)


def _chosen_command(argv: Sequence[str]) -> str | None:
    """The sub-command named on the command line (the first word that is not an option)."""
    for word in argv:
        if not word.startswith("-"):
            names = {m.rsplit(".", 1)[1].replace("_", "-"): m for m in COMMAND_MODULES}
            return names.get(word)
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or (``only``: a module of ``COMMAND_MODULES``) one with just that
    sub-command: a run imports only its own command's dependencies (requests, gguf and numpy
    took a third of a ``generate`` run when every command was imported)."""
    parser = argparse.ArgumentParser(
        prog="llama-bindgen",
        description="Fetch, parse, bind, build and verify llama.cpp releases.",
    )
    parser.add_argument("--version", action="version", version=f"llama-bindgen {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        if only is None or name == only:
            importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_chosen_command(words))
    args = parser.parse_args(words)
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
