"""Enums: every member's value as clang evaluated it, and the enum's size per target."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


def cffi_enum_size(values: Iterable[int]) -> int:
    """The size cffi gives an enum from its values alone: int's 4 bytes when every value fits 32
    bits (signed or unsigned), else 8. An enum the compiler stores in another size (a fixed
    underlying type, a packed enum) cannot be bound as that enum type."""
    return 4 if all(-(2**31) <= v < 2**32 for v in values) else 8


@dataclass(frozen=True)
class EnumMember:
    name: str
    value: int
    doc: str = ""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "value": self.value}
        if self.doc:
            data["doc"] = self.doc
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> EnumMember:
        return EnumMember(data["name"], int(data["value"]), data.get("doc", ""))


@dataclass(frozen=True)
class Enum:
    """A named enum (``tagless`` when only a typedef names it). Members keep declaration order;
    ``sizes`` maps a target triple to ``sizeof`` the enum there."""

    name: str
    header: str
    members: tuple[EnumMember, ...]
    sizes: dict[str, int] = field(default_factory=dict)
    tagless: bool = False
    doc: str = ""

    @property
    def c_name(self) -> str:
        return self.name if self.tagless else f"enum {self.name}"

    def member(self, name: str) -> EnumMember | None:
        for item in self.members:
            if item.name == name:
                return item
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "header": self.header,
            "members": [m.to_json() for m in self.members],
            "sizes": {t: self.sizes[t] for t in sorted(self.sizes)},
            "tagless": self.tagless,
            "doc": self.doc,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Enum:
        return Enum(
            name=data["name"],
            header=data["header"],
            members=tuple(EnumMember.from_json(m) for m in data["members"]),
            sizes={t: int(v) for t, v in data["sizes"].items()},
            tagless=bool(data["tagless"]),
            doc=data.get("doc", ""),
        )
