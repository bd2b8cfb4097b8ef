"""``llama-bindgen doctor``: what this machine has for each platform and backend a bump gates,
which ones a bump here builds and gates or leaves out (and why), and the one ``apt-get install``
line that adds what is missing."""

from __future__ import annotations

import argparse
import json
from typing import Any

from generator.errors import UsageError

NOT_READY_EXIT = 3  # packages would add a build or gate this machine lacks (as not-run)


def run(args: argparse.Namespace) -> int:
    from generator.bump.readiness import default_keys, install_line, machine_report

    known = default_keys()
    asked = list(args.platform or [])
    unknown = [k for k in asked if k not in known]
    if unknown:
        raise UsageError(f"--platform {unknown[0]}: not a build key ({', '.join(known)})")
    found, text = machine_report(asked or None)
    if args.json:
        record = {
            "keys": [
                {"key": k.key, "ready": k.ready, "cannot_build": k.cannot_build,
                 "cannot_run": k.cannot_run, "packages": list(k.packages)}
                for k in found
            ],
            "install": install_line(found),
        }  # fmt: skip
        print(json.dumps(record, indent=2, sort_keys=True))
    else:
        print(text)
    return 0 if not install_line(found) else NOT_READY_EXIT


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="what this machine can build and gate, and what to install for the rest",
        description=(
            "Check, for each platform and backend a bump gates, what it needs here (compilers, "
            "cross toolchains, qemu, wine, Vulkan headers and lavapipe, nvcc, zig, Node for the "
            "workflow lint): which ones a bump here builds and gates, which it leaves out and "
            "why, and the one apt-get install line (the platform registry's packages, the "
            "list .ci/run installs) that adds the rest. Exit 0 when nothing installable is missing "
            "(platforms no package can bring here, such as macOS, do not count), 3 otherwise."
        ),
    )
    parser.add_argument(
        "--platform", action="append", metavar="KEY",
        help="only this build key (<platform> or <platform>-<backend>; repeatable)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.set_defaults(func=run)
