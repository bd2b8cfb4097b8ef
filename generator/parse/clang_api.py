"""The one module that imports ``clang.cindex``: a thin, typed layer over the libclang wheel.

Everything else in ``generator.parse`` talks to libclang through the names re-exported here.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator, Sequence
from ctypes import byref, c_int, c_longlong, c_uint, c_ulonglong, c_void_p, cast
from dataclasses import dataclass

from clang.cindex import (  # re-exported for generator.parse
    AvailabilityKind,
    Cursor,
    CursorKind,
    Diagnostic,
    File,
    Index,
    SourceLocation,
    StorageClass,
    TranslationUnit,
    TranslationUnitLoadError,
    Type,
    TypeKind,
    c_object_p,
    conf,
)

from generator.errors import UsageError

__all__ = [
    "AvailabilityKind",
    "ClangDiagnostic",
    "Cursor",
    "CursorKind",
    "StorageClass",
    "TranslationUnit",
    "Type",
    "TypeKind",
    "cursor_at",
    "diagnostics",
    "is_anonymous_record",
    "is_macro_function_like",
    "location_file",
    "parse",
    "walk",
]

_INDEXES = threading.local()  # one libclang index per thread
_ERROR_SEVERITY: int = int(Diagnostic.Error)


def _index() -> Index:
    """This thread's libclang index (an index is not to be shared between threads)."""
    index: Index | None = getattr(_INDEXES, "index", None)
    if index is None:
        index = Index.create()
        _INDEXES.index = index
    return index


@dataclass(frozen=True)
class ClangDiagnostic:
    severity: int  # 2 warning, 3 error, 4 fatal (clang's numbering)
    file: str
    line: int
    column: int
    message: str

    @property
    def is_error(self) -> bool:
        return self.severity >= _ERROR_SEVERITY

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.message}"


def parse(
    entry_name: str, entry_text: str, args: Sequence[str], detailed: bool = True
) -> TranslationUnit:
    """Parse an in-memory C file ``entry_name`` with ``args``; never raises on C errors (read
    ``diagnostics``)."""
    options = TranslationUnit.PARSE_SKIP_FUNCTION_BODIES
    if detailed:
        options |= TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD
    try:
        return _index().parse(
            entry_name,
            args=list(args),
            unsaved_files=[(entry_name, entry_text)],
            options=options,
        )
    except TranslationUnitLoadError as exc:
        # libclang gives no reason; the usual one is a target triple it does not know
        targets = [a.split("=", 1)[1] for a in args if a.startswith("--target=")]
        targets += [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-target"]
        said = f" for target {', '.join(targets)}" if targets else ""
        raise UsageError(
            f"libclang could not start parsing {entry_name}{said}: is it a target triple clang "
            "knows (for example x86_64-linux-gnu)?"
        ) from exc


def diagnostics(tu: TranslationUnit) -> list[ClangDiagnostic]:
    found = []
    for diag in tu.diagnostics:
        loc = diag.location
        found.append(
            ClangDiagnostic(
                severity=int(diag.severity),
                file=loc.file.name if loc.file is not None else "<unknown>",
                line=int(loc.line),
                column=int(loc.column),
                message=str(diag.spelling),
            )
        )
    return found


def type_key(ctype: Type) -> bytes:
    """A key equal for equal types of one translation unit, without a string from libclang: a
    ``CXType`` is its kind and clang's ``QualType`` pointer (with the unit's), and one type is
    one pointer."""
    return bytes(ctype)


# Per translation unit: libclang's file handle (a pointer into that unit) -> the file's name.
_FILE_NAMES: weakref.WeakKeyDictionary[TranslationUnit, dict[int, str]] = (
    weakref.WeakKeyDictionary()
)


def location_file(cursor: Cursor) -> str | None:
    """The name of the file a cursor is declared in, as clang spells it, or ``None`` for
    built-ins. A plain string: the parser asks for every cursor, and ``Path`` objects cost more
    than the libclang call. Only the file handle is asked for (not line and column), and each
    file's name is read from libclang once per translation unit."""
    handle = c_object_p()
    conf.lib.clang_getInstantiationLocation(cursor.location, byref(handle), None, None, None)
    address = cast(handle, c_void_p).value
    if not address:
        return None
    names = _FILE_NAMES.setdefault(cursor.translation_unit, {})
    name = names.get(address)
    if name is None:
        name = names[address] = str(conf.lib.clang_getFileName(File(handle)))
    return name


def cursor_at(tu: TranslationUnit, file_name: str, line: int, column: int) -> Cursor | None:
    """The cursor at a position of one of the translation unit's files (None: no such file)."""
    file = tu.get_file(file_name)
    if file is None:
        return None
    found: Cursor | None = Cursor.from_location(
        tu, SourceLocation.from_position(tu, file, line, column)
    )
    return found


def walk(cursor: Cursor) -> Iterator[Cursor]:
    """Direct children of ``cursor``."""
    children: Iterator[Cursor] = cursor.get_children()
    return children


def is_macro_function_like(cursor: Cursor) -> bool:
    result: int = conf.lib.clang_Cursor_isMacroFunctionLike(cursor)
    return bool(result)


def is_anonymous_record(cursor: Cursor) -> bool:
    """True for an anonymous struct/union *member* (``union { ... };`` inside a record)."""
    result: int = conf.lib.clang_Cursor_isAnonymousRecordDecl(cursor)
    return bool(result)


_UNSIGNED_KINDS = frozenset(
    {
        TypeKind.BOOL, TypeKind.CHAR_U, TypeKind.UCHAR, TypeKind.CHAR16, TypeKind.CHAR32,
        TypeKind.USHORT, TypeKind.UINT, TypeKind.ULONG, TypeKind.ULONGLONG, TypeKind.UINT128,
    }
)  # fmt: skip


def enum_integer_type(enum_decl: Cursor) -> Type:
    """The integer type an enum is stored as (its fixed underlying type, or the one the compiler
    chose), typedefs resolved."""
    integer: Type = enum_decl.enum_type
    return integer.get_canonical()


def enum_constant_value(constant: Cursor, integer: Type) -> int:
    """An enumerator's value, read unsigned when the enum's integer type is unsigned (clang's
    signed read sign-extends it: 32809 in a uint16_t enum would come back as -32727)."""
    if integer.kind in _UNSIGNED_KINDS:
        unsigned: int = conf.lib.clang_getEnumConstantDeclUnsignedValue(constant)
        return unsigned
    signed: int = conf.lib.clang_getEnumConstantDeclValue(constant)
    return signed


_EVAL_INT = 1  # CXEval_Int
_evaluate_lock = threading.Lock()
_evaluate_ready = False


def _declare_evaluate() -> None:
    """libclang's cursor evaluation, which clang.cindex does not declare: its prototypes."""
    global _evaluate_ready
    with _evaluate_lock:
        if _evaluate_ready:
            return
        lib = conf.lib
        lib.clang_Cursor_Evaluate.argtypes = [Cursor]
        lib.clang_Cursor_Evaluate.restype = c_void_p
        lib.clang_EvalResult_getKind.argtypes = [c_void_p]
        lib.clang_EvalResult_getKind.restype = c_int
        lib.clang_EvalResult_isUnsignedInt.argtypes = [c_void_p]
        lib.clang_EvalResult_isUnsignedInt.restype = c_uint
        lib.clang_EvalResult_getAsUnsigned.argtypes = [c_void_p]
        lib.clang_EvalResult_getAsUnsigned.restype = c_ulonglong
        lib.clang_EvalResult_getAsLongLong.argtypes = [c_void_p]
        lib.clang_EvalResult_getAsLongLong.restype = c_longlong
        lib.clang_EvalResult_dispose.argtypes = [c_void_p]
        lib.clang_EvalResult_dispose.restype = None
        _evaluate_ready = True


def evaluate_integer(cursor: Cursor) -> int | None:
    """The integer value clang computes for a declaration's initializer (None: not an integer,
    or not computable)."""
    _declare_evaluate()
    lib = conf.lib
    result = lib.clang_Cursor_Evaluate(cursor)
    if not result:
        return None
    try:
        if lib.clang_EvalResult_getKind(result) != _EVAL_INT:
            return None
        if lib.clang_EvalResult_isUnsignedInt(result):
            unsigned: int = lib.clang_EvalResult_getAsUnsigned(result)
            return unsigned
        signed: int = lib.clang_EvalResult_getAsLongLong(result)
        return signed
    finally:
        lib.clang_EvalResult_dispose(result)


# libclang's CXCallingConv values by name (Index.h); clang.cindex does not wrap them
_CALLING_CONVENTIONS = {
    0: "Default", 1: "C", 2: "X86StdCall", 3: "X86FastCall", 4: "X86ThisCall", 5: "X86Pascal",
    6: "AAPCS", 7: "AAPCS_VFP", 8: "X86RegCall", 9: "IntelOclBicc", 10: "Win64",
    11: "X86_64SysV", 12: "X86VectorCall", 13: "Swift", 14: "PreserveMost", 15: "PreserveAll",
    16: "AArch64VectorCall", 17: "SwiftAsync", 18: "AArch64SVEPCS", 19: "M68kRTD",
    100: "Invalid", 200: "Unexposed",
}  # fmt: skip


def calling_convention(function_type: Type) -> str:
    """The calling convention of a function type, by libclang's name (``C``, ``Win64``, ...)."""
    value: int = conf.lib.clang_getFunctionTypeCallingConv(function_type)
    return _CALLING_CONVENTIONS.get(value, str(value))
