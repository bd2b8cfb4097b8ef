"""Render an ``ApiDiff`` as Markdown and as JSON (both through templates/report/)."""

from __future__ import annotations

import json
from typing import Any

from generator import __version__
from generator.diff.model import ApiDiff, Change
from generator.templating import environment

SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Functions", ("function",)),
    ("Structs and unions", ("struct", "union")),
    ("Enums", ("enum",)),
    ("Typedefs", ("typedef",)),
    ("Constants", ("constant",)),
)


def _section(title: str, changes: list[Change]) -> dict[str, Any]:
    return {
        "title": title,
        "added": [c for c in changes if c.action == "added"],
        "removed": [c for c in changes if c.action == "removed"],
        "changed": [c for c in changes if c.action == "changed"],
    }


def render_markdown(diff: ApiDiff) -> str:
    sections = [
        _section(title, [c for c in diff.changes if c.kind in kinds]) for title, kinds in SECTIONS
    ]
    return (
        environment()
        .get_template("report/diff.md.j2")
        .render(
            diff=diff,
            sections=sections,
            all_targets=diff.targets,
            generator_version=__version__,
            breaking_count=sum(1 for c in diff.changes if c.breaking),
            compatible_count=sum(1 for c in diff.changes if not c.breaking),
        )
    )


def render_json(diff: ApiDiff) -> str:
    data = {"generator_version": __version__, **diff.to_json()}
    text = json.dumps(data, indent=2, sort_keys=True)
    return environment().get_template("report/diff.json.j2").render(diff_json=text)
