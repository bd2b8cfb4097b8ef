"""Structs and unions: fields in declaration order and their layout on every target."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from generator.ir.ctype import CType

RecordKind = Literal["struct", "union"]


@dataclass(frozen=True)
class Field:
    """One member. An anonymous struct/union member has ``name == ""``, ``type.kind`` set to
    ``struct``/``union`` with an empty name, and its own members in ``members``."""

    name: str
    type: CType
    bit_width: int | None = None
    doc: str = ""
    members: tuple[Field, ...] = field(default_factory=tuple)

    @property
    def anonymous(self) -> bool:
        return not self.name

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "type": self.type.to_json()}
        if self.bit_width is not None:
            data["bit_width"] = self.bit_width
        if self.doc:
            data["doc"] = self.doc
        if self.members:
            data["members"] = [m.to_json() for m in self.members]
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> Field:
        return Field(
            name=data["name"],
            type=CType.from_json(data["type"]),
            bit_width=data.get("bit_width"),
            doc=data.get("doc", ""),
            members=tuple(Field.from_json(m) for m in data.get("members", ())),
        )


@dataclass(frozen=True)
class FieldLayout:
    """Where a named member lives, in bits from the start of the record. Members of anonymous
    structs/unions appear under their own names (C lets you reach them that way)."""

    name: str
    bit_offset: int
    bit_width: int | None = None

    @property
    def offset(self) -> int:
        return self.bit_offset // 8

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "offset": self.offset}
        if self.bit_width is not None or self.bit_offset % 8:
            data["bit_offset"] = self.bit_offset
        if self.bit_width is not None:
            data["bit_width"] = self.bit_width
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> FieldLayout:
        return FieldLayout(
            name=data["name"],
            bit_offset=int(data.get("bit_offset", data["offset"] * 8)),
            bit_width=data.get("bit_width"),
        )


@dataclass(frozen=True)
class RecordLayout:
    size: int
    align: int
    fields: tuple[FieldLayout, ...]

    def field(self, name: str) -> FieldLayout | None:
        for item in self.fields:
            if item.name == name:
                return item
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "align": self.align,
            "fields": [f.to_json() for f in self.fields],
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> RecordLayout:
        return RecordLayout(
            size=data["size"],
            align=data["align"],
            fields=tuple(FieldLayout.from_json(f) for f in data["fields"]),
        )


@dataclass(frozen=True)
class Record:
    """A struct or union.

    ``name`` is the tag, or for ``typedef struct { ... } name;`` the typedef name with
    ``tagless`` set. ``opaque`` records are declared but never defined in the headers: they have
    no fields and no layouts. ``layouts`` maps a target triple to the layout clang computed.
    ``layout_attributes`` names the attributes that change the layout from the natural one,
    on the record or any of its members (``aligned``, ``packed``), sorted: a cffi cdef cannot
    say them.
    """

    kind: RecordKind
    name: str
    header: str
    fields: tuple[Field, ...] = ()
    layouts: dict[str, RecordLayout] = field(default_factory=dict)
    opaque: bool = False
    tagless: bool = False
    doc: str = ""
    layout_attributes: tuple[str, ...] = ()

    @property
    def c_name(self) -> str:
        """How C (and cffi) spells the type: ``struct x`` or, if tagless, the typedef name."""
        return self.name if self.tagless else f"{self.kind} {self.name}"

    def ctype(self) -> CType:
        return CType("typedef", self.name) if self.tagless else CType(self.kind, self.name)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "header": self.header,
            "fields": [f.to_json() for f in self.fields],
            "layouts": {t: self.layouts[t].to_json() for t in sorted(self.layouts)},
            "opaque": self.opaque,
            "tagless": self.tagless,
            "doc": self.doc,
        }
        if self.layout_attributes:  # absent when none: earlier ir.json files stay as they were
            data["layout_attributes"] = list(self.layout_attributes)
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> Record:
        return Record(
            kind=data["kind"],
            name=data["name"],
            header=data["header"],
            fields=tuple(Field.from_json(f) for f in data["fields"]),
            layouts={t: RecordLayout.from_json(v) for t, v in data["layouts"].items()},
            opaque=bool(data["opaque"]),
            tagless=bool(data["tagless"]),
            doc=data.get("doc", ""),
            layout_attributes=tuple(data.get("layout_attributes", ())),
        )
