"""``llama-bindgen propose TAG``: the pull request (or, when a gate failed, the issue) for a bump.

Run by the tracking workflow after ``bump``: with the bump's branch pushed, it opens the pull
request for the tag or updates the open one, its description the API/ABI report and the gate
table; with ``--failed`` it opens or updates the tag's issue naming the failing gates and where
their logs are. It never pushes anything.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from generator.errors import UsageError
from generator.github_api import DEFAULT_API_URL, TOKEN_ENV, check_repo, optional_token
from generator.release.wheels import planned_wheels
from generator.tracking import TrackingClient


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{what} {path}: {exc.strerror or exc}") from None


def _gates(path: Path) -> dict[str, list[dict[str, str]]]:
    """bump's gates.json: platform -> [{gate, status, detail, log}]."""
    try:
        data = json.loads(_read(path, "--gates"))
    except ValueError:
        raise UsageError(f"--gates {path}: not JSON (bump writes gates.json)") from None
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise UsageError(f"--gates {path}: not bump's gates.json (platform -> list of gates)")
    return data


def gate_table(gates: dict[str, list[dict[str, str]]]) -> str:
    names = sorted({str(g.get("gate", "")) for results in gates.values() for g in results})
    rows = [
        "| platform | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for platform, results in sorted(gates.items()):
        by_gate = {str(g.get("gate")): str(g.get("status")) for g in results}
        rows.append(f"| {platform} | " + " | ".join(by_gate.get(n, "-") for n in names) + " |")
    return "\n".join(rows)


def failures(gates: dict[str, list[dict[str, str]]]) -> list[str]:
    return [
        f"- {platform}: {g.get('gate')} {g.get('status')}: {g.get('detail', '')}"
        for platform, results in sorted(gates.items())
        for g in results
        if g.get("status") != "passed"
    ]


def wheels_section(tag: str, gates: dict[str, list[dict[str, str]]]) -> str:
    """The wheels a merge would publish: those of the builds whose every gate passed."""
    passed = [
        k for k, results in gates.items() if all(g.get("status") == "passed" for g in results)
    ]
    lines = planned_wheels(tag, passed) or ["- none: no build passed every gate"]
    return "Wheels a merge would publish (`llama-bindgen release`):\n\n" + "\n".join(lines) + "\n\n"


def run(args: argparse.Namespace) -> int:
    repo = check_repo(args.github_repo)
    gates = _gates(args.gates)
    token = optional_token()
    if not token:
        raise UsageError(f"propose needs a token in ${TOKEN_ENV} (pull requests and issues)")
    client = TrackingClient(token, args.api_url)
    if args.failed:
        failed = failures(gates) or ["- (no gate failed in --gates: the bump stopped earlier)"]
        logs = f"\n\nLogs: {args.logs_url}" if args.logs_url else ""
        body = (
            f"`llama-bindgen bump {args.tag}` did not pass every gate, so nothing was proposed.\n\n"
            + "\n".join(failed)
            + f"\n\n{gate_table(gates)}{logs}\n"
        )
        proposal = client.propose_issue(repo, args.tag, body)
    else:
        if args.branch is None or args.report is None:
            raise UsageError("propose without --failed needs --branch and --report")
        body = (
            f"`llama-bindgen bump {args.tag}` passed every gate it ran.\n\n"
            f"{gate_table(gates)}\n\n{wheels_section(args.tag, gates)}"
            f"{_read(args.report, '--report').rstrip()}\n"
        )
        proposal = client.propose_pull(repo, args.branch, args.base, args.tag, body)
    print(f"{'opened' if proposal.created else 'updated'} {proposal.kind} #{proposal.number}")
    print(proposal.url)
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "propose",
        help="open or update the pull request (or the failure issue) for a bumped tag",
        description=__doc__,
    )
    parser.add_argument("tag", help="the upstream tag that was bumped")
    parser.add_argument("--github-repo", required=True, metavar="OWNER/NAME")
    parser.add_argument("--gates", type=Path, required=True, help="the bump's gates.json")
    parser.add_argument("--report", type=Path, help="the bump's API/ABI report (api-diff.md)")
    parser.add_argument("--branch", help="the pushed branch holding the bump")
    parser.add_argument("--base", default="main", help="the pull request's base (%(default)s)")
    parser.add_argument("--failed", action="store_true", help="a gate failed: open an issue")
    parser.add_argument("--logs-url", help="where the failing gates' logs were uploaded")
    parser.add_argument("--api-url", default=DEFAULT_API_URL, help="GitHub API base URL")
    parser.set_defaults(func=run)
