"""Each fact of the wrapper contract is written once (issue 31): the strategies, their names,
which decode a draft context, the limits and the status codes live in ``llama_mtp.h``; whether a
tree has the MTP API lives in ``mtp_api_rule.txt``; a platform's library file names live in
``platforms.py`` (``tests/gen/test_platform_tables.py`` holds the shipped modules to that one).
The shipped modules and the bindings' templates import the generated values; the wrapper's other
C sources use the header's enumerators and macros. This test fails where any of them writes
such a value of its own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from generator.emit.wrapper_contract import STRATEGY_PREFIX, strategy_name
from generator.paths import shipped_dir, templates_dir, wrapper_dir
from generator.sources import mtp_api

HEADER = wrapper_dir() / "llama_mtp.h"
_ENUMERATOR = re.compile(r"^\s*(LLAMA_MTP_(?:STATUS|STRATEGY)_\w+)\s*=\s*(\d+)", re.M)
_DEFINE = re.compile(r"^#define\s+(LLAMA_MTP_\w+)\s+(\d+)\s*$", re.M)


def _header_facts() -> tuple[dict[str, int], set[str]]:
    """The header's enumerators and integer macros (name -> value), and the strategy names."""
    text = HEADER.read_text(encoding="utf-8")
    values = {name: int(v) for name, v in _ENUMERATOR.findall(text)}
    values.update({name: int(v) for name, v in _DEFINE.findall(text)})
    names = {strategy_name(n) for n in values if n.startswith(STRATEGY_PREFIX)}
    return values, names


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                found.add(id(body[0].value))
    return found


def _wrapper_statuses(function: ast.AST) -> set[str]:
    """Names a function assigns from a ``llama_mtp_*`` call (the wrapper's statuses)."""
    found = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            if "llama_mtp_" in ast.unparse(node.value.func):
                found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return found


def _python_violations(path: Path, names: set[str]) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in skip and node.value in names:
            found.append(f"{path.name}:{node.lineno}: strategy name {node.value!r} as a literal")
        if not isinstance(node, ast.FunctionDef):
            continue
        statuses = _wrapper_statuses(node)
        for compare in (n for n in ast.walk(node) if isinstance(n, ast.Compare)):
            sides = [compare.left, *compare.comparators]
            named = any(isinstance(s, ast.Name) and s.id in statuses for s in sides)
            if named and any(isinstance(s, ast.Constant) for s in sides):
                found.append(f"{path.name}:{compare.lineno}: a wrapper status compared to a number")
    return found


def test_the_header_is_where_the_contract_is_written() -> None:
    values, names = _header_facts()
    assert "draft-mtp" in names and "ngram-mod" in names
    assert {"LLAMA_MTP_STATUS_OK", "LLAMA_MTP_NGRAM_MAX", "LLAMA_MTP_DRAFT_MAX"} <= set(values)


SHIPPED_MODULES = sorted(
    p.relative_to(shipped_dir()).as_posix() for p in shipped_dir().rglob("*.py")
)


@pytest.mark.parametrize("module", SHIPPED_MODULES)
def test_shipped_modules_write_no_strategy_or_status_of_their_own(module: str) -> None:
    _, names = _header_facts()
    assert _python_violations(shipped_dir() / module, names) == []


def test_every_shipped_module_is_shipped() -> None:
    """The subpackage's modules (runtime/) are found here, and emit copies each of them."""
    from generator.emit import SHIPPED

    assert "runtime/context.py" in SHIPPED_MODULES
    assert sorted(SHIPPED) == SHIPPED_MODULES


def test_the_python_checks_catch_what_they_look_for(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        '"""draft-mtp"""\nMODE = "draft-mtp"\n\n\ndef f(w):\n'
        "    status = w.llama_mtp_create(1)\n    return status == 3\n"
    )
    assert len(_python_violations(bad, {"draft-mtp"})) == 2


def test_templates_write_no_strategy_name() -> None:
    _, names = _header_facts()
    quoted = re.compile("|".join(rf"[\"']{re.escape(n)}[\"']" for n in sorted(names)))
    for template in sorted(templates_dir().glob("bindings/*.py.j2")):
        text = template.read_text(encoding="utf-8")
        assert not quoted.search(text), template.name


def test_the_wrappers_c_sources_take_values_from_the_header() -> None:
    values, names = _header_facts()
    limits = {n: v for n, v in values.items() if n.endswith("_MAX")}
    literal = re.compile("|".join(rf'"{re.escape(n)}"' for n in sorted(names)))
    for source in sorted(wrapper_dir().glob("llama_mtp*.*")):
        if source == HEADER:
            continue
        text = source.read_text(encoding="utf-8")
        assert not literal.search(text), f"{source.name} spells a strategy name"
        assert not _ENUMERATOR.search(text), f"{source.name} gives a contract enumerator a value"
        for name, value in limits.items():
            if re.search(rf"\b{value}\b", text):
                pytest.fail(f"{source.name} repeats {name}'s value {value}")


def test_the_mtp_api_rule_is_read_not_retyped() -> None:
    cmake = (wrapper_dir() / "CMakeLists.txt").read_text(encoding="utf-8")
    assert mtp_api.RULE_FILE in cmake
    for need in mtp_api.rule():
        if need.text != mtp_api.NO_TEXT:
            assert need.text not in cmake, f"CMakeLists.txt retypes the rule's {need.text}"
    for path in Path(shipped_dir().parent).rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if path.name != "mtp_api.py":
            assert "COMMON_SPECULATIVE_TYPE_DRAFT_MTP" not in text, path
