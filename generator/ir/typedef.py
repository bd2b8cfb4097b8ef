"""Typedefs, including callback typedefs (pointers to functions)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from generator.ir.ctype import CType


@dataclass(frozen=True)
class Typedef:
    name: str
    type: CType
    header: str
    doc: str = ""

    @property
    def is_callback(self) -> bool:
        """A callback typedef: ``typedef R (*name)(...)``."""
        return self.type.is_function_pointer

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type.to_json(),
            "header": self.header,
            "callback": self.is_callback,
            "doc": self.doc,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Typedef:
        return Typedef(
            data["name"], CType.from_json(data["type"]), data["header"], data.get("doc", "")
        )
