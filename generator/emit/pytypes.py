"""How the stubs spell C types in Python: what cffi hands back and what it accepts."""

from __future__ import annotations

import keyword

from generator.emit.support import SupportCheck
from generator.ir import CType, Field, Function, Record

_INTEGER_NAMES = frozenset(
    {
        "signed char", "unsigned char", "short", "unsigned short", "int", "unsigned int", "long",
        "unsigned long", "long long", "unsigned long long", "int8_t", "int16_t", "int32_t",
        "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "intptr_t", "uintptr_t",
        "intmax_t", "uintmax_t", "size_t", "ssize_t", "ptrdiff_t", "wchar_t",
    }
)  # fmt: skip
_FLOAT_NAMES = frozenset({"float", "double", "long double"})
_CHAR_NAMES = frozenset({"char"})


def python_name(name: str, index: int, taken: set[str]) -> str:
    """A parameter name usable in Python (C names kept where possible)."""
    candidate = name or f"arg{index}"
    if keyword.iskeyword(candidate) or candidate == "self":
        candidate += "_"
    while candidate in taken:
        candidate += "_"
    taken.add(candidate)
    return candidate


class PythonTypes:
    def __init__(
        self, check: SupportCheck, struct_classes: set[str], aliases: dict[str, str] | None = None
    ) -> None:
        self.check = check
        self.struct_classes = struct_classes
        self.aliases = aliases or {}

    def _resolve(self, ctype: CType) -> CType:
        """Look through typedefs that do not name a record."""
        for _ in range(32):
            if ctype.kind != "typedef":
                return ctype
            if ctype.name in self.struct_classes:
                return ctype
            typedef = self.check.api.typedef(ctype.name)
            if typedef is None:
                return ctype
            ctype = typedef.type
        return ctype

    def value(self, ctype: CType) -> str:
        """The Python type cffi returns when reading a value of this C type."""
        ctype = self._resolve(ctype)
        if ctype.kind == "builtin":
            if ctype.name == "void":
                return "None"
            if ctype.name in ("bool", "_Bool"):
                return "bool"
            if ctype.name in _INTEGER_NAMES:
                return "int"
            if ctype.name in _FLOAT_NAMES:
                return "float"
            if ctype.name in _CHAR_NAMES:
                return "bytes"
            return "CData"
        if ctype.kind == "enum":
            return "int"
        if ctype.kind in ("struct", "union", "typedef") and ctype.name in self.struct_classes:
            return self.aliases.get(ctype.name, ctype.name)
        return "CData"

    def argument(self, ctype: CType) -> str:
        """The Python types cffi accepts for a parameter of this C type."""
        resolved = self._resolve(ctype)
        if resolved.kind == "pointer" and resolved.target is not None:
            pointee = self._resolve(resolved.target)
            if pointee.kind == "builtin" and pointee.name == "char":
                return "bytes | CData"
            return "CData"
        text = self.value(resolved)
        if text == "float":
            return "float | int"
        return text

    def field_type(self, item: Field) -> str:
        if item.members:
            return "CData"
        return self.value(item.type)

    def parameters(self, function: Function) -> list[tuple[str, str]]:
        taken: set[str] = set()
        return [
            (python_name(p.name, i, taken), self.argument(p.type))
            for i, p in enumerate(function.params)
        ]

    def record_attributes(self, record: Record) -> list[tuple[str, str]]:
        """Attribute name and type for every member reachable by name."""
        found: list[tuple[str, str]] = []

        def visit(fields: tuple[Field, ...]) -> None:
            for item in fields:
                if item.anonymous:
                    visit(item.members)
                elif not keyword.iskeyword(item.name):  # reachable with getattr() only
                    found.append((item.name, self.field_type(item)))

        visit(record.fields)
        return found
