"""Integer constants from ``#define``s that clang could evaluate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Constant:
    name: str
    value: int
    header: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "header": self.header}

    @staticmethod
    def from_json(data: dict[str, Any]) -> Constant:
        return Constant(data["name"], int(data["value"]), data["header"])
