"""Doc comments: clang's raw comment text without the comment markers."""

from __future__ import annotations

import re

_LINE_MARKER = re.compile(r"^\s*(///?<?|/\*\*?<?|\*/|\*(?!/))\s?")


def clean(raw: str | None) -> str:
    """``// a\\n// b`` -> ``a\\nb``; block comments lose ``/*``, ``*/`` and leading ``*``."""
    if not raw:
        return ""
    lines = []
    for line in raw.strip().splitlines():
        line = line.strip()
        if line.endswith("*/"):
            line = line[:-2]
        line = _LINE_MARKER.sub("", line, count=1)
        lines.append(line.rstrip())
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)
