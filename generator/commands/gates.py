"""``llama-bindgen gates``: the gates of one platform and backend (build, symbols, layout, smoke).

What a CI matrix job runs after its build: the libraries are built (reused when up to date) into
``--out`` and checked against the committed bindings in ``generated/`` (which must be made from
the same commit). ``--json`` writes the outcomes in the shape ``python -m
generator.release.ci_job`` records. Exit 0 when every gate passed, 1 when one failed, 3 when none
failed but one could not run here (``not-run``, never a pass).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from generator.emit import PACKAGE_NAME
from generator.errors import GateFailedError, GateNotRunError, UsageError
from generator.paths import checkout_generated
from generator.platforms import (
    PLATFORMS,
    get_platform,
    host_platform_name,
)


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "gates",
        help="build one platform and run its gates (symbols, layout, smoke)",
        description=(
            "Build (or reuse) the native libraries of a fetched tree for one platform and "
            "backend, then run its gates against the committed bindings: symbols (every "
            "declared function exported), layout (the platform compiler's struct layouts equal "
            "the bindings'), smoke (MTP greedy generation where the platform's programs run "
            "here). A gate that cannot run here is not-run with its reason. Exit 0 all passed, "
            "1 one failed, 3 one could not run."
        ),
    )
    parser.add_argument("--tree", type=Path, required=True, help="llama.cpp tree (from `fetch`)")
    parser.add_argument("--platform", required=True, choices=sorted(PLATFORMS))
    parser.add_argument(
        "--backend", default="cpu", help="compute backend: cpu, or vulkan for linux-x86_64 (cpu)"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="native output folder (default: cache)"
    )
    parser.add_argument(
        "--bindings",
        type=Path,
        default=None,
        help=f"folder containing {PACKAGE_NAME}/ (default: <repo>/generated)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the outcomes here")
    parser.add_argument(
        "--logs", type=Path, default=None, help="keep the gate logs here (default: temporary)"
    )
    parser.set_defaults(func=run)


def _bindings_interface(bindings_parent: Path, commit: str) -> Any:
    from generator.ir.interface import Interface

    package = bindings_parent / PACKAGE_NAME
    manifest = package / "abi_manifest.json"
    if not manifest.is_file():
        raise UsageError(f"{manifest} not found: run `llama-bindgen generate` first")
    found = json.loads(manifest.read_text(encoding="utf-8")).get("commit")
    if found != commit:
        raise UsageError(
            f"{package} holds bindings for commit {found}, the tree is {commit}: "
            "run `llama-bindgen generate --tree ...` for this tree first"
        )
    return Interface.load(package / "ir.json")


def outcomes_record(platform: str, backend: str, outcomes: list[Any]) -> dict[str, Any]:
    """The ``--json`` document: what ``ci_job`` records (status per gate, reasons apart)."""
    return {
        "platform": platform,
        "backend": backend,
        "gates": {o.gate: o.status for o in outcomes},
        "details": {o.gate: o.detail for o in outcomes},
    }


def run(args: argparse.Namespace) -> int:
    from generator.bump.gates import (
        FAILED,
        GATES,
        NOT_RUN,
        GateOutcome,
        PlatformRun,
        platform_gates,
        summarise,
    )
    from generator.native.build import build_native, check_backend_buildable
    from generator.platforms import gate_key
    from generator.sources.tree import Tree

    plat = get_platform(args.platform)
    check_backend_buildable(plat, args.backend)
    tree = Tree.read(args.tree)
    bindings_parent: Path = (
        args.bindings or checkout_generated("gates without --bindings")
    ).resolve()
    api = _bindings_interface(bindings_parent, tree.commit_label)
    out: Path | None = args.out

    def builder(tree_root: Path, platform: str) -> Any:
        return build_native(tree_root, platform, out=out, backend=args.backend)

    host = host_platform_name()
    why = plat.why_not_buildable(host)
    cannot_build = f"cannot be built here: {why}" if why else ""
    with tempfile.TemporaryDirectory(prefix="llama-bindgen-gates-") as tmp:
        logs = (args.logs or Path(tmp)).resolve() / gate_key(plat.name, args.backend)
        run_ = PlatformRun(plat.name, tree, api, bindings_parent, logs, backend=args.backend)
        if cannot_build:
            outcomes = [GateOutcome(g, NOT_RUN, cannot_build) for g in GATES]
        else:
            outcomes = platform_gates(
                run_, host, builder,
                progress=lambda text: print(f"gates: {text}", file=sys.stderr, flush=True),
            )  # fmt: skip
        for outcome in outcomes:
            print(f"{outcome.gate}: {outcome.status}: {outcome.detail}")
            if outcome.status != "passed" and outcome.log and outcome.log.is_file():
                tail = outcome.log.read_text(encoding="utf-8", errors="replace")[-3000:]
                print(f"--- {outcome.log.name} (tail)\n{tail}", file=sys.stderr)
    print(summarise({f"{plat.name}/{args.backend}": outcomes}))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        record = outcomes_record(plat.name, args.backend, outcomes)
        args.json.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    failed = [o for o in outcomes if o.status == FAILED]
    not_run = [o for o in outcomes if o.status == NOT_RUN]
    if failed:
        raise GateFailedError(
            f"{plat.name}/{args.backend}: " + "; ".join(f"{o.gate} failed" for o in failed)
        )
    if not_run:
        reasons = {o.detail for o in not_run}
        if len(reasons) == 1:  # one cause (say, the platform cannot be built here): said once
            said = f"{', '.join(o.gate for o in not_run)} not run: {reasons.pop()}"
        else:
            said = "; ".join(f"{o.gate} not run ({o.detail})" for o in not_run)
        raise GateNotRunError(f"{plat.name}/{args.backend}: {said}")
    return 0
