"""C declarators printed from the IR mean, to cffi, the types they were built from."""

from __future__ import annotations

import cffi
import pytest

from generator.ir import CType

CHAR = CType.builtin("char")
FN = CType("function", target=CType.pointer(CHAR), params=(CType.pointer(CType("struct", "t")),))

CASES = [
    (CType.pointer(CType.pointer(CHAR)), "char **"),
    (CType.pointer(CType.pointer(CHAR, const=True)), "char * const *"),
    (CType.pointer(CType.builtin("char", const=True)), "const char *"),
    (CType.pointer(FN), "char *(*)(struct t *)"),
    (CType.pointer(CType.pointer(FN)), "char *(**)(struct t *)"),
    (CType("array", target=CType.pointer(FN), length=3), "char *(*[3])(struct t *)"),
    (CType.pointer(CType("array", target=CHAR, length=4)), "char (*)[4]"),
    (
        CType("function", target=CType.builtin("void"), params=(CHAR,), variadic=True),
        "void(*)(char, ...)",
    ),
]


@pytest.mark.parametrize(("ctype", "spelling"), CASES)
def test_declarator_matches_cffi(ctype: CType, spelling: str) -> None:
    ffi = cffi.FFI()
    ffi.cdef("struct t { int x; };")
    if ctype.kind == "function":
        printed = ffi.typeof(CType.pointer(ctype).declare())
    else:
        printed = ffi.typeof(ctype.declare())
    assert printed == ffi.typeof(spelling)
    named = ctype.declare("name")
    assert "name" in named


def test_json_round_trip() -> None:
    for ctype, _ in CASES:
        assert CType.from_json(ctype.to_json()) == ctype
