"""The last step of a CI matrix job: record its gates and checksum its artifact folder.

Runs on a bare runner (standard library only)::

    python -m generator.release.ci_job DIR --platform P --backend B build=success tests=success ...

Step outcomes are GitHub's (``success``, ``failure``, ``cancelled``, ``skipped``); ``success``
is recorded as ``passed``, anything else as itself, so :mod:`generator.release.gates` refuses it.
Writes ``DIR/gates.json`` and then ``DIR/SHA256SUMS`` over every file in DIR.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from generator.release.checksums import write_sums
from generator.release.gates import GATES_FILE, PASSED


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m generator.release.ci_job")
    parser.add_argument("folder", type=Path)
    parser.add_argument("--platform", required=True)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--log", default="")
    parser.add_argument("outcomes", nargs="+", metavar="GATE=OUTCOME")
    args = parser.parse_args(argv)
    gates: dict[str, str] = {}
    for item in args.outcomes:
        gate, sep, outcome = item.partition("=")
        if not sep or not gate:
            parser.error(f"{item!r} is not GATE=OUTCOME")
        gates[gate] = PASSED if outcome == "success" else (outcome or "unknown")
    if not args.folder.is_dir():
        parser.error(f"{args.folder} is not a folder")
    record = {"platform": args.platform, "backend": args.backend, "gates": gates, "log": args.log}
    (args.folder / GATES_FILE).write_text(
        json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    print(write_sums(args.folder))
    return 0 if all(v == PASSED for v in gates.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
