"""The shape of generator/: no function longer than 80 lines (ARCHITECTURE.md)."""

from __future__ import annotations

import ast

from tests.repo import REPO_ROOT

MAX_FUNCTION_LINES = 80


def test_no_function_in_generator_is_longer_than_the_limit() -> None:
    too_long = []
    for path in sorted((REPO_ROOT / "generator").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    where = path.relative_to(REPO_ROOT)
                    too_long.append(f"{where}:{node.lineno} {node.name}: {lines} lines")
    assert not too_long, f"split these (at most {MAX_FUNCTION_LINES} lines):\n" + "\n".join(
        too_long
    )
