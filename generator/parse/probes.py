"""Values only clang can compute: integer ``#define``s and deprecation messages.

A second, synthetic translation unit includes the headers and then, for each object-like macro,
declares ``enum { __llama_bindgen_const_N = (MACRO) };``; clang evaluates the expression and an
error on that line means the macro is not an integer constant. For each deprecated function it
takes the function's address, and clang's ``-Wdeprecated-declarations`` warning carries the
message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from generator.parse.clang_api import CursorKind, cursor_at, diagnostics, parse
from generator.parse.options import ParseOptions

PROBE_NAME = "llama_bindgen_probe.c"
_CONST_PREFIX = "__llama_bindgen_const_"
_CONST_OPEN = "enum { "
_CONST_COLUMN = len(_CONST_OPEN) + 1  # where each enumerator's name starts (1-based)
_DEPRECATED = re.compile(r"^'(?P<name>[A-Za-z_0-9]+)' is deprecated(?:: (?P<message>.*))?$")


@dataclass
class ProbeResult:
    constants: dict[str, int] = field(default_factory=dict)
    not_constant: dict[str, str] = field(default_factory=dict)  # name -> clang's reason
    deprecation_messages: dict[str, str] = field(default_factory=dict)


def run(
    options: ParseOptions, target: str, macros: list[str], deprecated: list[str]
) -> ProbeResult:
    entry = options.entry_text()
    lines = entry.rstrip("\n").splitlines()
    macro_lines: dict[int, str] = {}
    for i, name in enumerate(macros):
        lines.append(f"{_CONST_OPEN}{_CONST_PREFIX}{i} = ({name}) }};")
        macro_lines[len(lines)] = name
    for i, name in enumerate(deprecated):
        lines.append(f"static void *__llama_bindgen_use_{i} = (void *)&{name};")
    text = "\n".join(lines) + "\n"
    # no error limit: each macro that is not a constant must report its own error
    args = [*options.clang_args(target), "-ferror-limit=0", "-Wdeprecated-declarations"]
    tu = parse(PROBE_NAME, text, args, detailed=False)
    result = ProbeResult()
    failed: dict[str, str] = {}
    for diag in diagnostics(tu):
        if diag.file != PROBE_NAME:
            continue
        if diag.is_error and diag.line in macro_lines:
            failed.setdefault(macro_lines[diag.line], diag.message)
        match = _DEPRECATED.match(diag.message)
        if match:
            result.deprecation_messages[match["name"]] = match["message"] or ""
    # each enumerator read where it was written: walking the unit would visit every
    # declaration of the headers to find these few
    for line, name in macro_lines.items():
        if name in failed:
            continue
        constant = cursor_at(tu, PROBE_NAME, line, _CONST_COLUMN)
        if constant is None or constant.kind != CursorKind.ENUM_CONSTANT_DECL:
            raise RuntimeError(f"no probe enumerator for {name} at {PROBE_NAME}:{line}")
        result.constants[name] = int(constant.enum_value)
    result.not_constant = failed
    return result
