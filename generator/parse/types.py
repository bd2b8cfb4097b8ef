"""clang types -> IR ``CType``."""

from __future__ import annotations

from dataclasses import replace

from generator.ir.ctype import CType, CTypeKind
from generator.ir.enum_decl import cffi_enum_size
from generator.parse.clang_api import (
    CursorKind,
    Type,
    TypeKind,
    enum_constant_value,
    enum_integer_type,
    location_file,
)
from generator.parse.options import is_freestanding_header

_BUILTINS: dict[TypeKind, str] = {
    TypeKind.VOID: "void",
    TypeKind.BOOL: "bool",
    TypeKind.CHAR_S: "char",
    TypeKind.CHAR_U: "char",
    TypeKind.SCHAR: "signed char",
    TypeKind.UCHAR: "unsigned char",
    TypeKind.SHORT: "short",
    TypeKind.USHORT: "unsigned short",
    TypeKind.INT: "int",
    TypeKind.UINT: "unsigned int",
    TypeKind.LONG: "long",
    TypeKind.ULONG: "unsigned long",
    TypeKind.LONGLONG: "long long",
    TypeKind.ULONGLONG: "unsigned long long",
    TypeKind.FLOAT: "float",
    TypeKind.DOUBLE: "double",
    TypeKind.LONGDOUBLE: "long double",
}


def _sized_unlike_int(ctype: Type) -> bool:
    """Whether an enum's size differs from the one cffi gives it from its values alone
    (``cffi_enum_size``): a fixed underlying type or a packed enum. An enum never defined
    (``enum name;``) has no size: it stays the enum, which emit lists as not bound."""
    declaration = ctype.get_declaration().get_definition()
    if declaration is None:
        return False
    integer = enum_integer_type(declaration)
    values = [
        enum_constant_value(c, integer)
        for c in declaration.get_children()
        if c.kind == CursorKind.ENUM_CONSTANT_DECL
    ]
    return int(integer.get_size()) != cffi_enum_size(values)


def _enum_integer(integer: Type) -> CType:
    """An enum's integer type: as spelled when fixed (``uint8_t``), else the fixed-width type of
    the compiler's choice (``unsigned char`` -> ``uint8_t``, ``unsigned long`` -> ``uint64_t``:
    ``long`` would not say 8 bytes on every target)."""
    converted = convert(integer)
    if converted.kind != "builtin" or converted.name.endswith("_t"):
        return converted
    canonical = integer.get_canonical()
    unsigned = canonical.kind in (TypeKind.UCHAR, TypeKind.USHORT, TypeKind.UINT, TypeKind.ULONG,
                                  TypeKind.ULONGLONG, TypeKind.CHAR_U)  # fmt: skip
    return CType.builtin(f"{'u' if unsigned else ''}int{8 * int(canonical.get_size())}_t")


def _from_freestanding(ctype: Type) -> bool:
    name = location_file(ctype.get_declaration())
    return name is not None and is_freestanding_header(name)


def convert(ctype: Type) -> CType:
    """The IR form of a clang type. Records/enums without a name come back with ``name == ""``
    (the caller attaches their members)."""
    const = bool(ctype.is_const_qualified())
    kind = ctype.kind
    if kind == TypeKind.ELABORATED:
        inner = convert(ctype.get_named_type())
        return replace(inner, const=const or inner.const)
    if kind == TypeKind.TYPEDEF:
        name = ctype.get_declaration().spelling
        if _from_freestanding(ctype):
            return CType.builtin(name, const)
        return CType("typedef", name, const)
    if kind == TypeKind.ENUM and _sized_unlike_int(ctype):
        # A fixed underlying type (enum e : uint8_t), a packed enum or values beyond int: cffi
        # sizes every enum like int (or long long), so uses get the enum's integer type.
        return replace(_enum_integer(ctype.get_declaration().enum_type), const=const)
    if kind in (TypeKind.RECORD, TypeKind.ENUM):
        decl = ctype.get_declaration()
        tag: CTypeKind
        if kind == TypeKind.ENUM:
            tag = "enum"
        else:
            tag = "union" if decl.kind.name == "UNION_DECL" else "struct"
        if decl.is_anonymous():
            return CType(tag, "", const)
        spelled = ctype.get_canonical().spelling.removeprefix("const ").strip()
        if not spelled.startswith(f"{tag} "):
            return CType("typedef", decl.spelling, const)  # typedef struct { ... } name;
        return CType(tag, decl.spelling, const)
    if kind == TypeKind.POINTER:
        return CType.pointer(convert(ctype.get_pointee()), const)
    if kind == TypeKind.CONSTANTARRAY:
        return CType(
            "array",
            const=const,
            target=convert(ctype.element_type),
            length=int(ctype.element_count),
        )
    if kind == TypeKind.INCOMPLETEARRAY:
        return CType("array", const=const, target=convert(ctype.element_type))
    if kind == TypeKind.FUNCTIONPROTO:
        return CType(
            "function",
            target=convert(ctype.get_result()),
            params=tuple(convert(a) for a in ctype.argument_types()),
            variadic=bool(ctype.is_function_variadic()),
        )
    if kind == TypeKind.FUNCTIONNOPROTO:
        return CType("function", target=convert(ctype.get_result()))
    if kind in _BUILTINS:
        return CType.builtin(_BUILTINS[kind], const)
    # No IR form (128-bit integers, complex and half floats, vector types, ...): a builtin under
    # clang's spelling. cffi knows no such name, so each declaration that uses it is left out of
    # the bindings and listed with the reason (emit.support), and the rest of the header is bound.
    return CType.builtin(ctype.spelling.removeprefix("const ").strip(), const)
