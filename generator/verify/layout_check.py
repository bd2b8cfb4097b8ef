"""Three-way layout comparison: the compiled probe, clang's IR layout, and cffi's cdef."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from generator.ir.interface import Interface

Key = tuple[str, ...]
Values = Mapping[Key, int]


@dataclass(frozen=True)
class Disagreement:
    """One measurement on which the sources differ; ``None`` where a source has no value."""

    key: Key
    values: dict[str, int | None]

    def describe(self) -> str:
        kind, name, *rest = self.key
        what = {
            "size": f"sizeof({name})",
            "align": f"_Alignof({name})",
            "offset": f"offsetof({name}, {rest[0] if rest else '?'})",
            "enum": f"sizeof({name})",
        }.get(kind, " ".join(self.key))
        vals = ", ".join(f"{src} = {val}" for src, val in self.values.items())
        return f"{what}: {vals}"


def ir_values(interface: Interface, triple: str) -> dict[Key, int]:
    """Clang's layout for ``triple`` as the probe keys it."""
    out: dict[Key, int] = {}
    for record in interface.records:
        layout = record.layouts.get(triple)
        if record.opaque or layout is None:
            continue
        out[("size", record.name)] = layout.size
        out[("align", record.name)] = layout.align
        for fld in layout.fields:
            if fld.bit_width is None:
                out[("offset", record.name, fld.name)] = fld.offset
    for enum in interface.enums:
        if triple in enum.sizes:
            out[("enum", enum.name)] = enum.sizes[triple]
    return out


def cffi_values(ffi: Any, interface: Interface, keys: list[Key]) -> dict[Key, int]:
    """What cffi computes from the emitted cdef, for the same keys (host target only)."""
    c_names = {r.name: r.c_name for r in interface.records}
    c_names.update({e.name: e.c_name for e in interface.enums})
    out: dict[Key, int] = {}
    for key in keys:
        kind, plain, *rest = key
        name = c_names[plain]
        if kind in ("size", "enum"):
            out[key] = int(ffi.sizeof(name))
        elif kind == "align":
            out[key] = int(ffi.alignof(name))
        elif kind == "offset":
            out[key] = int(ffi.offsetof(name, rest[0]))
    return out


def compare(sources: Mapping[str, Values]) -> list[Disagreement]:
    """Every key on which two sources disagree or one source lacks a value, sorted by key."""
    keys = sorted({k for values in sources.values() for k in values})
    problems: list[Disagreement] = []
    for key in keys:
        seen = {name: values.get(key) for name, values in sources.items()}
        if len(set(seen.values())) > 1:
            problems.append(Disagreement(key, seen))
    return problems
