"""Walk a translation unit and collect declarations (host parse) or layouts (every target)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from generator.ir.constant import Constant
from generator.ir.ctype import CType, CTypeKind
from generator.ir.enum_decl import Enum, EnumMember
from generator.ir.function import Function, Param
from generator.ir.record import Field, FieldLayout, Record, RecordKind, RecordLayout
from generator.ir.typedef import Typedef
from generator.parse import comments
from generator.parse.clang_api import (
    AvailabilityKind,
    Cursor,
    CursorKind,
    StorageClass,
    TranslationUnit,
    Type,
    TypeKind,
    calling_convention,
    cursor_at,
    enum_constant_value,
    enum_integer_type,
    evaluate_integer,
    is_anonymous_record,
    is_macro_function_like,
    location_file,
    type_key,
    walk,
)
from generator.parse.options import ParseOptions
from generator.parse.types import convert

# Why an enum that is declared (``enum name;``) but never defined is not bound.
INCOMPLETE_ENUM_REASON = (
    "incomplete enum: declared but never defined, so its values and size are unknown (cffi "
    "would guess unsigned int)"
)
_RECORD_KINDS = (CursorKind.STRUCT_DECL, CursorKind.UNION_DECL)
_SKIPPED_KINDS = frozenset((CursorKind.MACRO_INSTANTIATION, CursorKind.INCLUSION_DIRECTIVE))
# Attributes (on a record or a member) that move members or change the size from what the
# member types alone give. ``#pragma pack`` leaves no cursor: libclang does not show it.
_LAYOUT_ATTRIBUTES = {CursorKind.PACKED_ATTR: "packed", CursorKind.ALIGNED_ATTR: "aligned"}


@dataclass
class Declarations:
    """What the host parse found, before layouts of other targets are merged in."""

    functions: dict[str, Function] = field(default_factory=dict)
    records: dict[str, Record] = field(default_factory=dict)
    enums: dict[str, Enum] = field(default_factory=dict)
    typedefs: dict[str, Typedef] = field(default_factory=dict)
    anonymous_enum_constants: dict[str, Constant] = field(default_factory=dict)
    variable_constants: dict[str, Constant] = field(default_factory=dict)  # static const ints
    skipped_variables: dict[str, tuple[str, str]] = field(default_factory=dict)  # (header, why)
    incomplete_enums: dict[str, tuple[str, str]] = field(default_factory=dict)  # (header, why)
    headers: set[str] = field(default_factory=set)
    macros: dict[str, str] = field(default_factory=dict)  # object-like macro -> header


# clang's names of the calling convention a target uses by default (and of none: Invalid/Unexposed
# for a declaration without one)
_DEFAULT_CONVENTIONS = frozenset({"C", "Default", "Invalid", "Unexposed"})


def _record_kind(cursor: Cursor) -> RecordKind:
    return "union" if cursor.kind == CursorKind.UNION_DECL else "struct"


def _is_tagless(cursor: Cursor) -> bool:
    spelled: str = cursor.type.get_canonical().spelling
    return not spelled.startswith(f"{_record_kind(cursor)} ")


def _innermost(ctype: Type) -> Type:
    """The type under ``ctype``'s arrays, pointers and elaborations."""
    while True:
        if ctype.kind == TypeKind.ELABORATED:
            ctype = ctype.get_named_type()
        elif ctype.kind in (TypeKind.CONSTANTARRAY, TypeKind.INCOMPLETEARRAY):
            ctype = ctype.element_type
        elif ctype.kind == TypeKind.POINTER:
            ctype = ctype.get_pointee()
        else:
            return ctype


def _field_type(clang_type: Type) -> tuple[CType, tuple[Field, ...]]:
    """A member's type, and the members of the unnamed record it is made of (directly, or as
    arrays of or pointers to it: C spells those inline, ``struct { ... } name[2];``). A member
    of an unnamed enum type has the enum's integer type (its constants are bound on their own)."""
    ctype = convert(clang_type)
    inner = _innermost(clang_type)
    declaration = inner.get_declaration()
    if inner.kind == TypeKind.RECORD and declaration.is_anonymous():
        return ctype, _fields(declaration)
    return _unnamed_enum_as_integer(ctype, inner), ()


def _unnamed_enum_as_integer(ctype: CType, inner: Type) -> CType:
    """``ctype`` with an unnamed enum under its arrays and pointers (``inner``, the clang type
    there) replaced by the enum's integer type: a cdef cannot name the enum."""
    declaration = inner.get_declaration()
    if inner.kind == TypeKind.ENUM and declaration.is_anonymous():
        return ctype.with_base(convert(declaration.enum_type))
    return ctype


def _fields(record: Cursor) -> tuple[Field, ...]:
    """Members in order; anonymous struct/union members carry their own members."""
    found: list[Field] = []
    for child in walk(record):
        if child.kind in _RECORD_KINDS and is_anonymous_record(child):
            kind: CTypeKind = _record_kind(child)
            found.append(Field("", CType(kind), members=_fields(child)))
        elif child.kind == CursorKind.FIELD_DECL:
            ctype, members = _field_type(child.type)
            width = int(child.get_bitfield_width()) if child.is_bitfield() else None
            found.append(
                Field(child.spelling, ctype, width, comments.clean(child.raw_comment), members)
            )
    return tuple(found)


def _layout_attributes(record: Cursor) -> set[str]:
    """``packed``/``aligned`` where the record, a member or an anonymous member declares it."""
    found: set[str] = set()
    for child in walk(record):
        if child.kind in _LAYOUT_ATTRIBUTES:
            found.add(_LAYOUT_ATTRIBUTES[child.kind])
        elif child.kind == CursorKind.FIELD_DECL:
            found.update(
                _LAYOUT_ATTRIBUTES[a.kind] for a in walk(child) if a.kind in _LAYOUT_ATTRIBUTES
            )
        elif child.kind in _RECORD_KINDS and is_anonymous_record(child):
            found.update(_layout_attributes(child))
    return found


def _flat_names(fields: tuple[Field, ...]) -> list[tuple[str, int | None]]:
    """Names reachable directly from the record (through anonymous members), in order."""
    names: list[tuple[str, int | None]] = []
    for item in fields:
        if item.anonymous:
            names.extend(_flat_names(item.members))
        else:
            names.append((item.name, item.bit_width))
    return names


def record_layout(cursor: Cursor, fields: tuple[Field, ...]) -> RecordLayout:
    ctype = cursor.type
    layouts = tuple(
        FieldLayout(name, int(ctype.get_offset(name)), width) for name, width in _flat_names(fields)
    )
    return RecordLayout(int(ctype.get_size()), int(ctype.get_align()), layouts)


class _Collector:
    def __init__(self, options: ParseOptions) -> None:
        self.options = options
        self.result = Declarations()
        self._declared_records: dict[str, tuple[RecordKind, str]] = {}
        self._declared_enums: dict[str, str] = {}  # ``enum name;`` -> header
        self._converted: dict[bytes, CType] = {}

    def convert(self, ctype: Type) -> CType:
        """``convert`` once per type (``type_key``: no string from libclang): the ~3,300
        parameters of llama.h and ggml use a few hundred types."""
        key = type_key(ctype)
        found = self._converted.get(key)
        if found is None:
            found = self._converted[key] = convert(ctype)
        return found

    def header_of(self, cursor: Cursor) -> tuple[str, str] | None:
        """(clang's file name, its base name) when the cursor is declared in one of our headers."""
        path = location_file(cursor)
        if path is None or self.options.library_of(path) is None:
            return None
        return path, os.path.basename(path)

    def visit(self, cursor: Cursor) -> None:
        for child in walk(cursor):
            if child.kind in _SKIPPED_KINDS:
                continue  # a third of a translation unit's cursors: not worth a location lookup
            where = self.header_of(child)
            if where is None:
                continue
            path, header = where
            self.result.headers.add(header)
            kind = child.kind
            if kind == CursorKind.FUNCTION_DECL:
                self.function(child, path, header)
            elif kind in _RECORD_KINDS:
                self.record(child, header)
            elif kind == CursorKind.ENUM_DECL:
                self.enum(child, header)
            elif kind == CursorKind.TYPEDEF_DECL:
                self.typedef(child, header)
            elif kind == CursorKind.MACRO_DEFINITION:
                self.macro(child, header)
            elif kind == CursorKind.VAR_DECL:  # the unit's children: file-scope variables
                self.variable(child, header)

    def macro(self, cursor: Cursor, header: str) -> None:
        """Remember object-like macros with a body; include guards and switches are empty."""
        if is_macro_function_like(cursor) or len(list(cursor.get_tokens())) < 2:
            return
        if cursor.spelling not in self.result.macros:
            self.result.macros[cursor.spelling] = header

    def variable(self, cursor: Cursor, header: str) -> None:
        """A global variable: a ``static const`` integer with a value is a constant; any other
        is listed as not bound (cffi's ABI mode could read an exported one, but none of
        llama.cpp's headers exports one, and a static one is in no library)."""
        name = cursor.spelling
        if name in self.result.variable_constants or name in self.result.skipped_variables:
            return
        const = bool(cursor.type.is_const_qualified())
        static = cursor.storage_class == StorageClass.STATIC
        value = evaluate_integer(cursor) if static and const else None
        if value is not None:
            self.result.variable_constants[name] = Constant(name, value, header)
            return
        spelled = cursor.type.spelling
        why = (
            f"static variable of type {spelled}: only a static const integer with a value is "
            "bound (as a constant)"
            if static
            else f"global variable of type {spelled}: the bindings carry no variables"
        )
        self.result.skipped_variables[name] = (header, why)

    def function(self, cursor: Cursor, path: str, header: str) -> None:
        name = cursor.spelling
        if name in self.result.functions:
            return
        library = self.options.library_of(path)
        assert library is not None
        params = tuple(Param(a.spelling, self.convert(a.type)) for a in cursor.get_arguments())
        variadic = cursor.type.kind == TypeKind.FUNCTIONPROTO and bool(
            cursor.type.is_function_variadic()
        )
        deprecated = "" if cursor.availability == AvailabilityKind.DEPRECATED else None
        convention = calling_convention(cursor.type)
        if convention in _DEFAULT_CONVENTIONS:
            convention = ""
        self.result.functions[name] = Function(
            name=name,
            result=self.convert(cursor.result_type),
            params=params,
            variadic=variadic,
            header=header,
            library=library,
            doc=comments.clean(cursor.raw_comment),
            deprecated=deprecated,
            static=cursor.storage_class == StorageClass.STATIC,
            unprototyped=cursor.type.kind == TypeKind.FUNCTIONNOPROTO,
            calling_convention=convention,
        )

    def record(self, cursor: Cursor, header: str) -> None:
        # nested definitions (struct inside struct) are file-scope in C
        for child in walk(cursor):
            if child.kind in _RECORD_KINDS:  # an unnamed one: for the named ones inside it
                self.record(child, header)
            elif child.kind == CursorKind.ENUM_DECL:
                self.enum(child, header)
        if cursor.is_anonymous():
            return
        name = cursor.spelling
        if not cursor.is_definition():
            self._declared_records.setdefault(name, (_record_kind(cursor), header))
            return
        if name in self.result.records:
            return
        fields = _fields(cursor)
        self.result.records[name] = Record(
            kind=_record_kind(cursor),
            name=name,
            header=header,
            fields=fields,
            tagless=_is_tagless(cursor),
            doc=comments.clean(cursor.raw_comment),
            layout_attributes=tuple(sorted(_layout_attributes(cursor))),
        )

    def enum(self, cursor: Cursor, header: str) -> None:
        integer = enum_integer_type(cursor)
        members = tuple(
            EnumMember(c.spelling, enum_constant_value(c, integer), comments.clean(c.raw_comment))
            for c in walk(cursor)
            if c.kind == CursorKind.ENUM_CONSTANT_DECL
        )
        if cursor.is_anonymous():
            for member in members:
                self.result.anonymous_enum_constants[member.name] = Constant(
                    member.name, member.value, header
                )
            return
        if not cursor.is_definition():
            self._declared_enums.setdefault(cursor.spelling, header)
            return
        if cursor.spelling in self.result.enums:
            return
        spelled: str = cursor.type.get_canonical().spelling
        self.result.enums[cursor.spelling] = Enum(
            name=cursor.spelling,
            header=header,
            members=members,
            tagless=not spelled.startswith("enum "),
            doc=comments.clean(cursor.raw_comment),
        )

    def typedef(self, cursor: Cursor, header: str) -> None:
        name = cursor.spelling
        underlying = cursor.underlying_typedef_type
        for child in walk(cursor):
            if child.kind in _RECORD_KINDS:
                self.record(child, header)
            elif child.kind == CursorKind.ENUM_DECL:
                self.enum(child, header)
        ctype = convert(underlying)
        if ctype.kind != "enum":  # typedef enum { ... } name stays the tagless enum itself
            ctype = _unnamed_enum_as_integer(ctype, _innermost(underlying))
        if ctype.kind == "typedef" and ctype.name == name:
            return  # typedef struct { ... } name; -> the record itself is named ``name``
        if ctype.kind == "enum" and not ctype.name:
            return
        if name not in self.result.typedefs:
            self.result.typedefs[name] = Typedef(
                name, ctype, header, comments.clean(cursor.raw_comment)
            )

    def finish(self) -> Declarations:
        for name, (kind, header) in self._declared_records.items():
            if name not in self.result.records:
                self.result.records[name] = Record(kind, name, header, opaque=True)
        for name, header in sorted(self._declared_enums.items()):
            if name not in self.result.enums:
                self.result.incomplete_enums[name] = (header, INCOMPLETE_ENUM_REASON)
        return self.result


def collect(tu: TranslationUnit, options: ParseOptions) -> Declarations:
    collector = _Collector(options)
    collector.visit(tu.cursor)
    return collector.finish()


# Where a definition is: clang's file name, line, column (the same in every target's parse).
Location = tuple[str, int, int]


@dataclass
class TargetLayouts:
    records: dict[str, RecordLayout] = field(default_factory=dict)
    enum_sizes: dict[str, int] = field(default_factory=dict)
    # "record:NAME" / "enum:NAME" -> where the measured definition is, for the next target
    locations: dict[str, Location] = field(default_factory=dict)


def _location(cursor: Cursor) -> Location | None:
    file = location_file(cursor)
    return None if file is None else (file, cursor.location.line, cursor.location.column)


def collect_layouts(
    tu: TranslationUnit,
    records: dict[str, Record],
    enum_names: set[str],
    locations: dict[str, Location] | None = None,
) -> TargetLayouts:
    """Sizes, alignments and offsets of the host's records and enums on this parse's target.
    ``locations`` (another target's ``TargetLayouts.locations``) lets it go straight to each
    definition instead of walking the whole translation unit; where one is not found there
    (a definition another target's preprocessing leaves out), it walks."""
    if locations:
        found = _layouts_at(tu, records, enum_names, locations)
        if found is not None:
            return found
    return _layouts_by_walking(tu, records, enum_names)


def _layouts_at(
    tu: TranslationUnit,
    records: dict[str, Record],
    enum_names: set[str],
    locations: dict[str, Location],
) -> TargetLayouts | None:
    found = TargetLayouts(locations=locations)
    for key, where in locations.items():
        kind, name = key.split(":", 1)
        cursor = cursor_at(tu, *where)
        if cursor is None or cursor.spelling != name or not cursor.is_definition():
            return None
        if kind == "record" and cursor.kind in _RECORD_KINDS:
            found.records[name] = record_layout(cursor, records[name].fields)
        elif kind == "enum" and cursor.kind == CursorKind.ENUM_DECL:
            found.enum_sizes[name] = int(cursor.type.get_size())
        else:
            return None
    return found  # what the other target measured, found at the same places in this one


def _layouts_by_walking(
    tu: TranslationUnit, records: dict[str, Record], enum_names: set[str]
) -> TargetLayouts:
    found = TargetLayouts()

    def visit(cursor: Cursor) -> None:
        for child in walk(cursor):
            kind = child.kind
            if kind in _RECORD_KINDS or kind == CursorKind.TYPEDEF_DECL:
                visit(child)
            if kind in _RECORD_KINDS and child.is_definition() and not child.is_anonymous():
                record = records.get(child.spelling)
                if record is not None and not record.opaque and child.spelling not in found.records:
                    found.records[child.spelling] = record_layout(child, record.fields)
                    _remember(found, f"record:{child.spelling}", child)
            elif kind == CursorKind.ENUM_DECL and child.is_definition():
                if child.spelling in enum_names and child.spelling not in found.enum_sizes:
                    found.enum_sizes[child.spelling] = int(child.type.get_size())
                    _remember(found, f"enum:{child.spelling}", child)

    visit(tu.cursor)
    return found


def _remember(found: TargetLayouts, key: str, cursor: Cursor) -> None:
    where = _location(cursor)
    if where is not None:
        found.locations[key] = where
