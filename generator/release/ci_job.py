"""The last step of a CI matrix job: record its gates and checksum its artifact folder.

Runs on the job's runner after ``nox -s gates`` (standard library only, so it runs whatever the
earlier steps left installed)::

    python -m generator.release.ci_job DIR --platform P --backend B --build OUTCOME \\
        [--gates GATES_JSON] [--log URL]

``--build`` is GitHub's outcome of the build step (``success``, ``failure``, ``cancelled``,
``skipped``); ``--gates`` is the ``--json`` file ``llama-bindgen gates`` wrote. Only what ran is
recorded as it came out: a gate is ``passed`` only when the gates file says so; a gate the file
does not name, a file that is missing or unreadable, and every gate after a build that did not
succeed are ``not-run`` with the reason. Writes ``DIR/gates.json`` (creating DIR when the build
left none) and then ``DIR/SHA256SUMS`` over every file in DIR. Exit 0 when every gate passed,
1 when one failed, 3 when one did not run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from generator.release.checksums import write_sums
from generator.release.gates import FAILED, GATES_FILE, NOT_RUN, OUTCOMES, PASSED, REQUIRED_GATES


def _from_gates_file(
    path: Path | None, platform: str, backend: str
) -> tuple[dict[str, str], dict[str, str], bool]:
    """(status, reason) per gate from ``llama-bindgen gates --json``, and whether the file was
    a record of this platform and backend (every gate not-run when it was not)."""
    gates = {g: NOT_RUN for g in REQUIRED_GATES}
    if path is None or not path.is_file():
        return gates, {g: "the gates step left no record" for g in REQUIRED_GATES}, False
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
        found = (data["platform"], data["backend"])
        statuses = dict(data["gates"])
        details = dict(data.get("details", {}))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        why = f"unreadable gates record {path.name} ({exc})"
        return gates, dict.fromkeys(REQUIRED_GATES, why), False
    if found != (platform, backend):
        why = f"{path.name} is the record of {found[0]}/{found[1]}"
        return gates, dict.fromkeys(REQUIRED_GATES, why), False
    reasons: dict[str, str] = {}
    for gate in REQUIRED_GATES:
        status = statuses.get(gate)
        if status not in OUTCOMES:
            reasons[gate] = f"the gates record has {status!r} for it"
            continue
        gates[gate] = str(status)
        if status != PASSED:
            reasons[gate] = str(details.get(gate, "")) or f"the gates run says {status}"
    return gates, reasons, True


def record(
    folder: Path, platform: str, backend: str, build_outcome: str, gates_file: Path | None, log: str
) -> dict[str, Any]:
    """The job's gate record (also written to ``folder/gates.json``)."""
    if build_outcome == "success":
        gates, reasons, usable = _from_gates_file(gates_file, platform, backend)
        if not usable:  # the build step itself succeeded; nothing after it is known to have run
            gates["build"] = PASSED
            reasons.pop("build", None)
    else:
        gates = {g: NOT_RUN for g in REQUIRED_GATES}
        gates["build"] = FAILED if build_outcome == "failure" else NOT_RUN
        reasons = {"build": f"the build step's outcome: {build_outcome}"}
        reasons |= {g: "the build did not succeed" for g in REQUIRED_GATES[1:]}
    doc = {
        "platform": platform,
        "backend": backend,
        "gates": gates,
        "reasons": {g: r for g, r in sorted(reasons.items()) if r},
        "log": log,
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / GATES_FILE).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", "utf-8")
    return doc


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m generator.release.ci_job")
    parser.add_argument("folder", type=Path)
    parser.add_argument("--platform", required=True)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--build", required=True, metavar="OUTCOME", help="the build step's")
    parser.add_argument("--gates", type=Path, default=None, help="llama-bindgen gates --json")
    parser.add_argument("--log", default="")
    args = parser.parse_args(argv)
    doc = record(args.folder, args.platform, args.backend, args.build, args.gates, args.log)
    for gate in REQUIRED_GATES:
        why = doc["reasons"].get(gate, "")
        print(f"{gate}: {doc['gates'][gate]}" + (f" ({why})" if why else ""))
    print(write_sums(args.folder))
    statuses = set(doc["gates"].values())
    return 0 if statuses == {PASSED} else 1 if FAILED in statuses else 3


if __name__ == "__main__":
    sys.exit(main())
