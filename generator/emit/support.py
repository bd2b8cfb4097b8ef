"""What cffi's ABI mode can express, and why the rest cannot be bound."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from generator.ir import CType, Field, Function, Interface, Record

# Standard typedef names cffi knows without a declaration (besides the C keywords' types).
CFFI_KNOWN_NAMES = frozenset(
    {
        "void", "bool", "_Bool", "char", "signed char", "unsigned char", "short",
        "unsigned short", "int", "unsigned int", "long", "unsigned long", "long long",
        "unsigned long long", "float", "double", "long double",
        "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t",
        "uint64_t", "intptr_t", "uintptr_t", "intmax_t", "uintmax_t", "size_t", "ssize_t",
        "ptrdiff_t", "wchar_t", "char16_t", "char32_t", "FILE",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Unsupported:
    """A declaration left out of the bindings, and why."""

    kind: str  # "function", "typedef", "record"
    name: str
    header: str
    reason: str


class SupportCheck:
    """Decides, declaration by declaration, what the cdef can carry."""

    def __init__(self, api: Interface, opaque: Mapping[str, str] | None = None) -> None:
        self.api = api
        self._typedef_reason: dict[str, str | None] = {}
        # records the cdef must not lay out for a reason found outside this check (name ->
        # reason; emit.cffi_layouts: cffi would lay them out unlike the compiler)
        self.forced = dict(opaque or {})
        # records whose layout the cdef cannot give: opaque in C, or made opaque here
        self.layoutless: set[str] = {r.name for r in api.records if r.opaque}
        # tagless records (typedef struct {...} name) left out: their name is undeclared
        self.dropped_names: dict[str, str] = {}

    def settle_records(self) -> dict[str, str]:
        """Find every record the cdef cannot lay out, following by-value members until nothing
        changes; returns record name -> reason."""
        reasons: dict[str, str] = {}
        for record in self.api.records:
            if record.name in self.forced and record.name not in self.layoutless:
                reasons[record.name] = self.forced[record.name]
                self.layoutless.add(record.name)
                if record.tagless:
                    self.dropped_names[record.name] = self.forced[record.name]
        changed = True
        while changed:
            changed = False
            for record in self.api.records:
                if record.name in self.layoutless:
                    continue
                problem = self.record_problem(record)
                if problem:
                    reasons[record.name] = problem
                    self.layoutless.add(record.name)
                    if record.tagless:
                        self.dropped_names[record.name] = problem
                    self._typedef_reason.clear()
                    changed = True
        return reasons

    def incomplete_problem(self, ctype: CType) -> str | None:
        """Why a by-value use of ``ctype`` (arrays included) needs a layout the cdef lacks."""
        element = ctype
        while element.kind == "array" and element.target is not None:
            element = element.target
        record = self.resolve_record(element)
        if record is not None and record.name in self.layoutless:
            return f"uses {record.c_name} by value, whose layout is not known"
        return None

    def type_problem(self, ctype: CType) -> str | None:
        """Why ``ctype`` cannot appear in the cdef, or ``None``."""
        if ctype.kind == "builtin" and ctype.name not in CFFI_KNOWN_NAMES:
            return f"type {ctype.name!r} has no cffi equivalent"
        if ctype.kind in ("struct", "union", "enum") and not ctype.name:
            return (
                f"an unnamed {ctype.kind} outside a record's members: a cffi cdef has no way "
                "to name it"
            )
        if ctype.kind == "enum" and self.api.enum(ctype.name) is None:
            return f"uses enum {ctype.name}, which is never defined (cffi would guess its size)"
        if ctype.kind == "typedef":
            if ctype.name in self.dropped_names:
                return f"uses {ctype.name}, which is not bound: {self.dropped_names[ctype.name]}"
            return self.typedef_problem(ctype.name)
        if ctype.target is not None:
            problem = self.type_problem(ctype.target)
            if problem:
                return problem
        for param in ctype.params:
            problem = self.type_problem(param)
            if problem:
                return problem
        return None

    def typedef_problem(self, name: str) -> str | None:
        if name in self._typedef_reason:
            return self._typedef_reason[name]
        self._typedef_reason[name] = None  # breaks cycles
        typedef = self.api.typedef(name)
        problem = self.type_problem(typedef.type) if typedef is not None else None
        if typedef is None and self.api.record(name) is None and self.api.enum(name) is None:
            problem = (
                f"type {name!r} is declared in none of the headers (a compiler builtin): cffi "
                "does not know it"
            )
        if problem:
            problem = (
                f"uses typedef {name}: {problem}" if "uses typedef" not in problem else problem
            )
        self._typedef_reason[name] = problem
        return problem

    def resolve_record(self, ctype: CType) -> Record | None:
        """The record a by-value type names, looking through typedefs."""
        seen = 0
        while ctype.kind == "typedef" and seen < 32:
            record = self.api.record(ctype.name)
            if record is not None and record.tagless:
                return record
            typedef = self.api.typedef(ctype.name)
            if typedef is None:
                return None
            ctype, seen = typedef.type, seen + 1
        if ctype.kind in ("struct", "union"):
            return self.api.record(ctype.name)
        return None

    def _by_value_problem(self, ctype: CType, role: str) -> str | None:
        record = self.resolve_record(ctype)
        if record is None:
            return None
        if record.name in self.layoutless:
            return f"{role} passes {record.c_name} by value, whose layout is not known"
        if record.kind == "union":
            return f"{role} passes union {record.name} by value (libffi cannot describe unions)"
        if _has_union_or_bitfield(self, record.fields, 0):
            return (
                f"{role} passes struct {record.name} by value, which holds a union or a "
                "bit-field (libffi cannot describe it)"
            )
        return None

    def function_problem(self, function: Function) -> str | None:
        if function.static:
            return "static function: defined in the header, exported by no library"
        if function.variadic:
            return "variadic function: cffi's ABI mode cannot call it safely"
        if function.unprototyped:
            return "declared without a parameter list (f()): its parameters are unknown"
        if function.calling_convention:
            return (
                f"calling convention {function.calling_convention}: cffi calls with the "
                "platform's default one"
            )
        for param in function.params:
            problem = self.type_problem(param.type) or self._by_value_problem(
                param.type, f"parameter {param.name or '?'}"
            )
            if problem:
                return problem
        return self.type_problem(function.result) or self._by_value_problem(
            function.result, "result"
        )

    def record_problem(self, record: Record) -> str | None:
        if record.layout_attributes:
            said = " and ".join(record.layout_attributes)
            return f"declared {said}: a cffi cdef cannot say that, so cffi would lay it out wrong"
        return _fields_problem(self, record.fields)


def _fields_problem(check: SupportCheck, fields: tuple[Field, ...]) -> str | None:
    for item in fields:
        problem = None
        if item.type.name or not item.members:
            problem = check.type_problem(item.type) or check.incomplete_problem(item.type)
        problem = problem or _fields_problem(check, item.members)
        if problem:
            return f"field {item.name or '(anonymous)'}: {problem}"
    return None


def _has_union_or_bitfield(check: SupportCheck, fields: tuple[Field, ...], depth: int) -> bool:
    """Whether a by-value struct holds a union or bit-field, directly or in by-value members."""
    if depth > 16:
        return False
    for item in fields:
        if item.bit_width is not None or item.type.kind == "union":
            return True
        if _has_union_or_bitfield(check, item.members, depth + 1):
            return True
        element = item.type
        while element.kind == "array" and element.target is not None:
            element = element.target
        inner = check.resolve_record(element)
        if inner is not None and (
            inner.kind == "union" or _has_union_or_bitfield(check, inner.fields, depth + 1)
        ):
            return True
    return False
