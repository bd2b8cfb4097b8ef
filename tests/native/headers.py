"""What the C headers declare, read with libclang: function names per header, enum values.

Used by the native tests when ``generated/llama_bindings/abi_manifest.json`` is not there yet, and
to read ``enum llama_mtp_status`` instead of repeating its numbers in the tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from clang import cindex

# libclang's wheel has no resource headers; these freestanding stand-ins are enough for
# llama.h and the ggml headers (built on clang's predefined macros).
_FREESTANDING = {
    "stdbool.h": "#define bool _Bool\n#define true 1\n#define false 0\n",
    "stddef.h": "typedef __SIZE_TYPE__ size_t;\ntypedef __PTRDIFF_TYPE__ ptrdiff_t;\n"
    "#define NULL ((void*)0)\n#define offsetof(t, m) __builtin_offsetof(t, m)\n",
    "stdint.h": "".join(
        f"typedef __{t.upper()}_TYPE__ {t}_t;\n"
        for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
    )
    + "typedef __INTPTR_TYPE__ intptr_t;\ntypedef __UINTPTR_TYPE__ uintptr_t;\n"
    + "#define INT32_MAX __INT32_MAX__\n#define INT64_MAX __INT64_MAX__\n",
    "inttypes.h": "#include <stdint.h>\n",
    "stdio.h": "typedef struct FILE FILE;\n",
    "stdarg.h": "typedef __builtin_va_list va_list;\n",
    "string.h": "",
    "stdlib.h": "",
    "assert.h": "",
}


@dataclass(frozen=True)
class HeaderDecls:
    functions: dict[str, str]  # function name -> header file name that declares it
    enums: dict[str, int]  # enumerator name -> value


def read_declarations(header: Path, include_dirs: list[Path], scratch: Path) -> HeaderDecls:
    """Parse ``header`` (C mode): the functions and enumerators of the headers it pulls in."""
    stubs = scratch / "freestanding"
    stubs.mkdir(parents=True, exist_ok=True)
    for name, text in _FREESTANDING.items():
        (stubs / name).write_text(text, encoding="utf-8")
    args = ["-x", "c", "-std=c11", "-nostdinc", f"-I{stubs}", *[f"-I{d}" for d in include_dirs]]
    tu = cindex.Index.create().parse(str(header), args=args)
    errors = [d for d in tu.diagnostics if d.severity >= cindex.Diagnostic.Error]
    if errors:
        raise RuntimeError(f"libclang could not parse {header}: {errors[0]}")
    functions: dict[str, str] = {}
    enums: dict[str, int] = {}
    for cursor in tu.cursor.get_children():
        if cursor.location.file is None:
            continue
        source = Path(cursor.location.file.name).name
        if cursor.kind == cindex.CursorKind.FUNCTION_DECL:
            functions.setdefault(cursor.spelling, source)
        elif cursor.kind == cindex.CursorKind.ENUM_DECL:
            for child in cursor.get_children():
                if child.kind == cindex.CursorKind.ENUM_CONSTANT_DECL:
                    enums[child.spelling] = int(child.enum_value)
    return HeaderDecls(functions=functions, enums=enums)
