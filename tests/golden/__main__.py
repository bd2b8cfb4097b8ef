"""``python -m tests.golden --update``: rewrite the golden expectations from the headers.
Without ``--update``: compare, print a diff per mismatch, exit 1 if any."""

from __future__ import annotations

import argparse
import sys

from tests.golden import harness


def check() -> int:
    stems = harness.header_stems()
    problems = [p for stem in stems for p in harness.mismatches(stem, harness.render_scratch(stem))]
    problems += harness.orphans()
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"{len(stems)} golden headers, {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.golden", description=__doc__)
    parser.add_argument(
        "--update", action="store_true", help="rewrite tests/golden/expected/ from the headers"
    )
    args = parser.parse_args(argv)
    if not args.update:
        return check()
    changed = harness.update()
    root = harness.HERE.parent.parent
    for path in changed:
        print(f"changed {path.relative_to(root)}")
    print(f"{len(harness.header_stems())} golden headers, {len(changed)} paths changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
