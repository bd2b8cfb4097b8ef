"""The ``llama-bindgen`` command line: one sub-command per module in ``generator.commands``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from generator import __version__
from generator.errors import BindgenError
from generator.paths import REPO_ENV

USAGE_EXIT = 2  # usage and input errors (as BindgenError subclasses mostly report)
INTERNAL_EXIT = 70  # a bug in llama-bindgen (EX_SOFTWARE)
TRACEBACK_ENV = "LLAMA_BINDGEN_TRACEBACK"

# Each module defines ``register(subparsers)``, which adds its parser and sets ``func``.
COMMAND_MODULES: tuple[str, ...] = (
    "generator.commands.build",
    "generator.commands.bump",
    "generator.commands.cache",
    "generator.commands.compat",
    "generator.commands.diff",
    "generator.commands.doctor",
    "generator.commands.fetch",
    "generator.commands.fetch_model",
    "generator.commands.gates",
    "generator.commands.generate",
    "generator.commands.gpu_check",
    "generator.commands.latest",
    "generator.commands.make_test_model",
    "generator.commands.matrix",
    "generator.commands.propose",
    "generator.commands.release",
    "generator.commands.smoke",
    "generator.commands.wheel",
)


def _chosen_command(argv: Sequence[str]) -> str | None:
    """The sub-command named on the command line (the first word that is not an option)."""
    names = {m.rsplit(".", 1)[1].replace("_", "-"): m for m in COMMAND_MODULES}
    words = iter(argv)
    for word in words:
        if word == "--repo":
            next(words, None)  # its value
        elif not word.startswith("-"):
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
    _add_repo_option(parser, None)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        if only is None or name == only:
            importlib.import_module(name).register(subparsers)
    for sub in subparsers.choices.values():  # also after the command word
        _add_repo_option(sub, argparse.SUPPRESS)
    return parser


def _add_repo_option(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument(
        "--repo",
        dest="checkout",
        type=Path,
        default=default,
        metavar="DIR",
        help=(
            "the llama-bindgen checkout to work on (releases.toml, generated/, CHANGELOG.md); "
            f"default: ${REPO_ENV}, else the working directory or its nearest parent holding "
            "releases.toml"
        ),
    )


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_chosen_command(words))
    args = parser.parse_args(words)
    if args.checkout is not None:
        # an environment variable, so that the commands' own subprocesses see the same checkout
        os.environ[REPO_ENV] = str(args.checkout.expanduser().resolve())
    try:
        result: int = args.func(args)
    except BindgenError as exc:
        print(f"llama-bindgen {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"llama-bindgen {args.command}: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # a path the user gave that cannot be read or written
        where = f": {exc.filename}" if exc.filename else ""
        print(f"llama-bindgen {args.command}: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return USAGE_EXIT
    except Exception as exc:
        if os.environ.get(TRACEBACK_ENV) == "1":
            raise
        print(
            f"llama-bindgen {args.command}: error: internal error ({type(exc).__name__}: {exc}); "
            f"rerun with {TRACEBACK_ENV}=1 for the traceback and report it",
            file=sys.stderr,
        )
        return INTERNAL_EXIT
    return result


if __name__ == "__main__":
    sys.exit(main())
