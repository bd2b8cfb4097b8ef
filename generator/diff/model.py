"""What a diff reports: one ``Change`` per declaration, with ``Detail``s for its parts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

DeclKind = Literal["function", "struct", "union", "enum", "typedef", "constant"]
Action = Literal["added", "removed", "changed"]


@dataclass(frozen=True)
class Detail:
    """One part of a change: a field, a member, a size. ``targets`` names the triples where a
    layout value changed this way (empty for changes that do not depend on the target)."""

    what: str  # e.g. "field added", "field moved", "size", "member renumbered"
    name: str
    breaking: bool
    old: str | None = None
    new: str | None = None
    targets: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "name": self.name,
            "breaking": self.breaking,
            "old": self.old,
            "new": self.new,
            "targets": list(self.targets),
        }


@dataclass(frozen=True)
class Change:
    kind: DeclKind
    name: str
    action: Action
    breaking: bool
    old: str | None = None  # e.g. the old signature
    new: str | None = None
    details: tuple[Detail, ...] = field(default_factory=tuple)

    @property
    def classification(self) -> str:
        return "ABI-breaking" if self.breaking else "compatible"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "action": self.action,
            "breaking": self.breaking,
            "classification": self.classification,
            "old": self.old,
            "new": self.new,
            "details": [d.to_json() for d in self.details],
        }


@dataclass(frozen=True)
class Side:
    tag: str
    commit: str
    digest: str
    label: str

    def to_json(self) -> dict[str, Any]:
        return {"tag": self.tag, "commit": self.commit, "digest": self.digest, "label": self.label}


@dataclass(frozen=True)
class ApiDiff:
    old: Side
    new: Side
    targets: tuple[str, ...]
    changes: tuple[Change, ...]
    notes: tuple[str, ...] = ()

    @property
    def breaking(self) -> bool:
        return any(c.breaking for c in self.changes)

    def to_json(self) -> dict[str, Any]:
        return {
            "old": self.old.to_json(),
            "new": self.new.to_json(),
            "targets": list(self.targets),
            "breaking": self.breaking,
            "summary": summary(self.changes),
            "changes": [c.to_json() for c in self.changes],
            "notes": list(self.notes),
        }


def summary(changes: tuple[Change, ...]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for change in changes:
        key = f"{change.kind} {change.action}"
        counts[key] = counts.get(key, 0) + 1
    counts["breaking"] = sum(1 for c in changes if c.breaking)
    counts["compatible"] = sum(1 for c in changes if not c.breaking)
    return dict(sorted(counts.items()))
