"""Whether a llama.cpp tree has the MTP API the llama_mtp wrapper needs: the one rule.

The rule is data, ``native_wrapper/mtp_api_rule.txt``, read here and by the wrapper's CMake
project, so fetch and parse (here, through :class:`sources.tree.Tree`) and the native build agree
by construction. The bindings follow: the parse includes the wrapper header exactly when the
rule holds, emit's ``MTP_API`` is whether it did, and the runtime reads ``MTP_API``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from generator.paths import wrapper_dir

RULE_FILE = "mtp_api_rule.txt"
NO_TEXT = "-"  # a line whose file must only exist


@dataclass(frozen=True)
class Requirement:
    path: str  # relative to the tree's root
    text: str  # what the file must contain; NO_TEXT: only that it exists
    reason: str  # why the tree cannot have the wrapper when the line does not hold


def rule(path: Path | None = None) -> tuple[Requirement, ...]:
    """The rule's lines, in order."""
    source = path or wrapper_dir() / RULE_FILE
    found: list[Requirement] = []
    for line in source.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        file, text, reason = (part.strip() for part in line.split("|"))
        found.append(Requirement(file, text, reason))
    return tuple(found)


def missing_reason(root: Path) -> str | None:
    """Why the tree at ``root`` cannot have the MTP wrapper (the first line that does not hold),
    or None when it can."""
    texts: dict[str, str] = {}
    for need in rule():
        target = root / need.path
        if not target.is_file():
            return need.reason
        if need.text == NO_TEXT:
            continue
        if need.path not in texts:
            texts[need.path] = target.read_text(encoding="utf-8", errors="replace")
        if need.text not in texts[need.path]:
            return need.reason
    return None
