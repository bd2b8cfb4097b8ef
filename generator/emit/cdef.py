"""The cffi cdef: every expressible declaration, ordered so each name is declared before use."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from generator.emit.cffi_layouts import layout_mismatches
from generator.emit.support import SupportCheck, Unsupported
from generator.ir import CType, Enum, Field, Function, Interface, Record, Typedef
from generator.ir.enum_decl import cffi_enum_size

_INDENT = "    "
Node = tuple[str, str]  # ("record" | "typedef", name)


@dataclass
class Cdef:
    """The cdef text in sections, plus what had to stay out of it."""

    forward_declarations: list[str] = field(default_factory=list)
    enums: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)
    bound_functions: list[Function] = field(default_factory=list)
    bound_records: list[Record] = field(default_factory=list)
    bound_typedefs: list[Typedef] = field(default_factory=list)
    unsupported: list[Unsupported] = field(default_factory=list)


def declarations_text(cdef: Cdef, functions: list[str] | None = None) -> str:
    """The declarations of ``cdef`` (no comments), with ``functions`` instead of all bound
    function lines when given: what the API-mode module compiles."""
    parts = [*cdef.forward_declarations, *cdef.enums, *cdef.types]
    parts += cdef.functions if functions is None else functions
    return "\n".join(parts) + "\n"


def cdef_identity(cdef: Cdef) -> str:
    """sha256 of the declarations: the generated bindings record it, and the compiled API-mode
    module returns the value it was built from, so the loader can tell they match."""
    return hashlib.sha256(declarations_text(cdef).encode()).hexdigest()


def enum_definition(enum: Enum, *, values_only: bool = False) -> str:
    """The enum's cdef; ``values_only``: its constants in an unnamed enum (an enum whose uses
    have its integer type, see parse.types)."""
    lines = [f"{_INDENT}{m.name} = {m.value}," for m in enum.members]
    body = "\n".join(lines)
    if values_only:
        return f"enum {{\n{body}\n}};"
    if enum.tagless:
        return f"typedef enum {{\n{body}\n}} {enum.name};"
    return f"enum {enum.name} {{\n{body}\n}};"


def _sized_unlike_cffi(enum: Enum, host: str) -> bool:
    """Whether the compiler stores ``enum`` in another size than cffi gives it
    (``cffi_enum_size``). Its uses have the integer type (parse.types); the cdef keeps only its
    constants, so that cffi holds no wrongly sized type of that name."""
    size = enum.sizes.get(host)
    return size is not None and size != cffi_enum_size(m.value for m in enum.members)


def _field_lines(fields: tuple[Field, ...], depth: int) -> list[str]:
    pad = _INDENT * depth
    lines: list[str] = []
    for item in fields:
        if item.members:
            kind, declarator = _unnamed_record_declarator(item)
            lines.append(f"{pad}{kind} {{")
            lines.extend(_field_lines(item.members, depth + 1))
            lines.append(f"{pad}}}{' ' + declarator if declarator else ''};")
            continue
        decl = item.type.declare(item.name)
        if item.bit_width is not None:
            decl = f"{decl} : {item.bit_width}"
        lines.append(f"{pad}{decl};")
    return lines


def _unnamed_record_declarator(item: Field) -> tuple[str, str]:
    """For a member made of an unnamed record: what comes before its body (``struct``, ``const
    union``) and after it (``name``, ``name[2]``, ``* name``: C spells arrays of and pointers to
    an unnamed record inline)."""
    base = item.type
    while base.kind in ("array", "pointer") and base.target is not None:
        base = base.target
    head = f"const {base.kind}" if base.const else base.kind
    if base is item.type:
        return head, item.name
    placeholder = "@"
    declared = item.type.with_base(CType("typedef", placeholder)).declare(item.name)
    return head, declared.removeprefix("const ").removeprefix(placeholder).strip()


def record_definition(record: Record) -> str:
    body = "\n".join(_field_lines(record.fields, 1))
    if record.tagless:
        return f"typedef {record.kind} {{\n{body}\n}} {record.name};"
    return f"{record.kind} {record.name} {{\n{body}\n}};"


class _Orderer:
    """Depth-first ordering of typedefs and record definitions by what they need declared."""

    def __init__(self, api: Interface, records: dict[str, Record], typedefs: dict[str, Typedef]):
        self.api = api
        self.records = records
        self.typedefs = typedefs
        self.order: list[Node] = []
        self._state: dict[Node, int] = {}

    def _deps(self, ctype: CType, under_pointer: bool, out: set[Node]) -> None:
        if ctype.kind == "typedef":
            if ctype.name in self.records and self.records[ctype.name].tagless:
                out.add(("record", ctype.name))
            elif ctype.name in self.typedefs:
                out.add(("typedef", ctype.name))
        elif ctype.kind in ("struct", "union") and ctype.name and not under_pointer:
            if ctype.name in self.records:
                out.add(("record", ctype.name))
        pointer = under_pointer or ctype.kind in ("pointer", "function")
        if ctype.target is not None:
            self._deps(ctype.target, pointer, out)
        for param in ctype.params:
            self._deps(param, True, out)

    def _field_deps(self, fields: tuple[Field, ...], out: set[Node]) -> None:
        for item in fields:
            self._deps(item.type, False, out)
            self._field_deps(item.members, out)

    def deps(self, node: Node) -> list[Node]:
        kind, name = node
        out: set[Node] = set()
        if kind == "record":
            self._field_deps(self.records[name].fields, out)
        else:
            self._deps(self.typedefs[name].type, False, out)
        out.discard(node)
        return sorted(out)

    def visit(self, node: Node) -> None:
        state = self._state.get(node, 0)
        if state:
            return  # done, or on the stack (a cycle through pointers needs no order)
        self._state[node] = 1
        for dep in self.deps(node):
            self.visit(dep)
        self._state[node] = 2
        self.order.append(node)


def build_cdef(api: Interface) -> Cdef:
    """The cdef of every declaration cffi can carry, each record laid out by cffi as by the
    compiler on the host (emit.cffi_layouts): a record cffi would lay out otherwise is declared
    opaque, listed with the reason, and so is every record that holds it by value."""
    opaque: dict[str, str] = {}
    for _ in range(len(api.records) + 1):
        result = _build_cdef(api, opaque)
        differ = layout_mismatches(declarations_text(result), result.bound_records, api)
        if not differ:
            return result
        opaque.update(differ)
    raise AssertionError("the cffi layout check did not settle")  # each round removes a record


def _build_cdef(api: Interface, opaque: dict[str, str]) -> Cdef:
    check = SupportCheck(api, opaque)
    result = Cdef()

    records: dict[str, Record] = {}
    record_problems = check.settle_records()
    for record in api.records:
        problem = record_problems.get(record.name)
        if problem:
            result.unsupported.append(
                Unsupported("record", record.name, record.header, f"{problem}; declared opaque")
            )
            if record.tagless:
                continue
            record = Record(record.kind, record.name, record.header, opaque=True)
        records[record.name] = record
        result.bound_records.append(record)

    typedefs: dict[str, Typedef] = {}
    for typedef in api.typedefs:
        problem = check.typedef_problem(typedef.name)
        if problem:
            result.unsupported.append(Unsupported("typedef", typedef.name, typedef.header, problem))
            continue
        typedefs[typedef.name] = typedef
        result.bound_typedefs.append(typedef)

    for name, record in sorted(records.items()):
        if not record.tagless:
            result.forward_declarations.append(f"{record.kind} {name};")
    typedef_names = {t.name for t in api.typedefs}
    result.enums = [
        enum_definition(
            e,
            values_only=(e.tagless and e.name in typedef_names)
            or _sized_unlike_cffi(e, api.host_target),
        )
        for e in api.enums
    ]

    orderer = _Orderer(api, records, typedefs)
    for name in sorted(set(records) | set(typedefs)):
        if name in records and not records[name].opaque:
            orderer.visit(("record", name))
        if name in typedefs:
            orderer.visit(("typedef", name))
    for kind, name in orderer.order:
        if kind == "record":
            if not records[name].opaque:
                result.types.append(record_definition(records[name]))
        else:
            result.types.append(f"typedef {typedefs[name].type.declare(name)};")

    for function in api.functions:
        problem = check.function_problem(function)
        if problem:
            result.unsupported.append(
                Unsupported("function", function.name, function.header, problem)
            )
            continue
        result.functions.append(f"{function.signature()};")
        result.bound_functions.append(function)
    for variable in api.skipped_variables:
        result.unsupported.append(
            Unsupported("variable", variable.name, variable.header, variable.reason)
        )
    for enum in api.incomplete_enums:
        result.unsupported.append(Unsupported("enum", enum.name, enum.header, enum.reason))
    result.unsupported.sort(key=lambda u: (u.kind, u.name))
    return result
