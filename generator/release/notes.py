"""Release notes: the API/ABI report of the bump, framed by the tag, the gates and the assets."""

from __future__ import annotations

from pathlib import Path

from generator import __version__
from generator.release.assets import Artifact
from generator.release.errors import ReleaseRefusedError
from generator.release.gates import REQUIRED_GATES, PlatformGates
from generator.release.render import render
from generator.release.wheels import WHEEL_NAME

NOTES_NAME = "RELEASE_NOTES.md"


def read_notes(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ReleaseRefusedError(f"release notes {path}: {exc.strerror or exc}") from exc


def render_notes(
    *,
    tag: str,
    commit: str,
    digest: str,
    gates: list[PlatformGates],
    artifacts: list[Artifact],
    report: str,
    diff_summary: str,
    left_out: list[tuple[str, str]] | None = None,
    wheels_left_out: list[tuple[str, str]] | None = None,
) -> str:
    present = {g for p in gates for g in p.results}
    names = [g for g in REQUIRED_GATES if g in present] + sorted(present - set(REQUIRED_GATES))
    rows = [
        {"key": p.key, "cells": [p.results.get(n, "-") for n in names]}
        for p in sorted(gates, key=lambda p: p.key)
    ]
    return render(
        "release/notes.md.j2",
        generator_version=__version__,
        tag=tag,
        commit=commit,
        digest=digest,
        gate_names=names,
        gate_rows=rows,
        artifacts=sorted(artifacts, key=lambda a: a.file),
        report=report,
        diff_summary=diff_summary,
        left_out=sorted(left_out or []),
        wheels=sorted((a for a in artifacts if a.kind == "wheel"), key=lambda a: a.file),
        wheels_left_out=sorted(wheels_left_out or []),
        wheel_name=WHEEL_NAME,
    )
