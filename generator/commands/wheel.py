"""``llama-bindgen wheel REF --platform P``: the wheel of one native build, gated or not.

A release ships the wheels of the builds whose every gate passed; this verb makes the wheel of
one build of a ``releases.toml`` entry whatever its gates (such as the macOS builds made here,
whose smoke cannot run here) and writes into the wheel's ``build-info.json`` that no release
gated it (``wheel.gates``). The last stdout line is the wheel's path.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from generator.commands.release import add_build_inputs, default_native_dir, recorded_release
from generator.errors import UsageError
from generator.paths import checkout_generated
from generator.platforms import PLATFORMS, gate_key
from generator.release.assemble import bindings_package, release_tag
from generator.release.native import find_native_builds
from generator.release.wheels import NOT_GATED, make_wheel


def run(args: argparse.Namespace) -> int:
    rel, _toml_path = recorded_release(args, "a wheel needs its bindings")
    native: Path = args.native or default_native_dir(rel.cache_key)
    key = gate_key(args.platform, args.backend)
    builds = [
        b
        for b in find_native_builds(native, rel.commit_label)
        if (b.platform, b.backend) == (args.platform, args.backend)
    ]
    if not builds:
        raise UsageError(f"no {key} build in {native}: run `llama-bindgen build` for it first")
    package = bindings_package(args.generated or checkout_generated("wheel"), rel.commit_label)
    args.out.mkdir(parents=True, exist_ok=True)
    wheel = make_wheel(builds[0], package, release_tag(rel), args.out, gates=NOT_GATED)
    print(wheel.path)
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "wheel",
        help="the wheel of one native build, gated or not (say, a macOS build made here)",
        description=(
            "Make the wheel of one native build of a releases.toml entry into --out, whatever "
            "its gates; its build-info.json says no release gated it. Release wheels come "
            "from `llama-bindgen release`, which packs only builds whose gates all passed."
        ),
    )
    parser.add_argument("ref", metavar="REF")
    parser.add_argument(
        "--platform", required=True, choices=sorted(PLATFORMS), help="the build's platform"
    )
    parser.add_argument("--backend", default="cpu", help="the build's backend (cpu)")
    parser.add_argument("--out", type=Path, default=Path("dist"), help="output folder (dist)")
    add_build_inputs(parser)
    parser.set_defaults(func=run)
