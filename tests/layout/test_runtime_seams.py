"""The runtime package's seams (issue 38 item 6): a module uses another object's and another
module's public surface only, and imports at its top, except where a function-level import
saves measured import time.

Read from ``generator/shipped/runtime/`` (what ``generated/llama_bindings/runtime/`` copies)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

RUNTIME = Path(__file__).resolve().parents[2] / "generator" / "shipped" / "runtime"
# where an import inside a function is allowed: a comment on its line or just above it that
# says what import time it saves (a measured figure, in ms), or points at such a comment
SAVING_MARKS = (" ms", "see _steps")


def _modules() -> list[Path]:
    found = sorted(RUNTIME.glob("*.py"))
    assert len(found) >= 10, found
    return found


def _private_reaches(tree: ast.AST) -> list[tuple[int, str]]:
    """``x._name`` where ``x`` is not ``self`` or ``cls`` (dunders are Python's own)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        found.append((node.lineno, f"{ast.unparse(owner)}.{name}"))
    return found


def _everywhere(check: Callable[[ast.AST], list[tuple[int, str]]]) -> dict[str, str]:
    """``check``'s findings in every runtime module, by ``file:line``."""
    return {
        f"{path.name}:{line}": text
        for path in _modules()
        for line, text in check(ast.parse(path.read_text(encoding="utf-8")))
    }


def test_no_module_reaches_into_another_objects_private_names() -> None:
    assert _everywhere(_private_reaches) == {}


def _private_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """``from .module import _name``: another module's private name."""
    return [
        (node.lineno, f"{node.module}.{alias.name}")
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level > 0
        for alias in node.names
        if alias.name.startswith("_")
    ]


def test_no_module_imports_another_modules_private_names() -> None:
    assert _everywhere(_private_imports) == {}


def _function_imports(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines += [
                inner.lineno
                for inner in ast.walk(node)
                if isinstance(inner, ast.Import | ast.ImportFrom)
            ]
    return lines


def test_imports_inside_functions_say_what_they_save() -> None:
    unexplained = []
    for path in _modules():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for line in _function_imports(ast.parse(text)):
            near = " ".join(lines[max(0, line - 2) : line])
            if not any(mark in near for mark in SAVING_MARKS):
                unexplained.append(f"{path.name}:{line}: {lines[line - 1].strip()}")
    assert unexplained == []


def test_the_checks_find_what_they_look_for() -> None:
    """Each check fails on a module that breaks its rule."""
    assert _private_imports(ast.parse("from .llama_log import _LLAMA_LOG, LLAMA_LOGGER\n")) == [
        (1, "llama_log._LLAMA_LOG")
    ]
    sample = ast.parse(
        "class A:\n"
        "    def f(self, ctx):\n"
        "        import json\n"
        "        return ctx._native, self._ok, ctx.__class__\n"
    )
    assert _private_reaches(sample) == [(4, "ctx._native")]
    assert _function_imports(sample) == [3]
