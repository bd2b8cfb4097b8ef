"""Each fact of the wrapper contract is written once (issues 31 and 38): the strategies, their
names, which decode a draft context, the limits, the defaults and the status codes live in
``llama_mtp.h``; whether a tree has the MTP API lives in ``mtp_api_rule.txt``; a platform's
library file names live in ``platforms.py`` (``tests/gen/test_platform_tables.py`` holds the
shipped modules to that one). The shipped modules and the bindings' templates import the
generated values; the wrapper's other C sources, the smoke's C driver and the wrapper's CMake
files use the header's enumerators and macros (CMake reads the strategy list from the header);
the smoke and the release modules take names from the header's rule. This test fails where any
of them writes such a value of its own, and shows that each of its checks can fail."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from generator.emit.wrapper_contract import (
    STATUS_PREFIX,
    STRATEGY_PREFIX,
    header_macro,
    status_name,
    strategy_name,
)
from generator.paths import package_dir, shipped_dir, templates_dir, wrapper_dir
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


def _status_names() -> set[str]:
    """The statuses' names (``llama_mtp_status_name``: "not_in_release", ...), but "ok", which
    is also every driver's JSON key for a run that worked."""
    values, _ = _header_facts()
    return {status_name(n) for n in values if n.startswith(STATUS_PREFIX)} - {"ok"}


def _python_violations(
    path: Path, names: set[str], status_names: frozenset[str] = frozenset()
) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in skip and node.value in names:
            found.append(f"{path.name}:{node.lineno}: strategy name {node.value!r} as a literal")
        if isinstance(node, ast.Constant) and id(node) not in skip and node.value in status_names:
            found.append(f"{path.name}:{node.lineno}: status name {node.value!r} as a literal")
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
        '"""draft-mtp"""\nMODE = "draft-mtp"\nWHY = "not_in_release"\n\n\ndef f(w):\n'
        "    status = w.llama_mtp_create(1)\n    return status == 3\n"
    )
    assert len(_python_violations(bad, {"draft-mtp"})) == 2
    assert len(_python_violations(bad, {"draft-mtp"}, frozenset({"not_in_release"}))) == 3


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


# ---- the smoke, the release modules and the wrapper's CMake files (issue 38) --------------------

SMOKE_AND_RELEASE = sorted(
    p.relative_to(package_dir()).as_posix()
    for folder in ("smoke", "release")
    for p in (package_dir() / folder).rglob("*.py")
)


@pytest.mark.parametrize("module", SMOKE_AND_RELEASE)
def test_the_smoke_and_the_release_write_no_strategy_or_status_of_their_own(module: str) -> None:
    _, names = _header_facts()
    path = package_dir() / module
    assert _python_violations(path, names, frozenset(_status_names())) == []


def _c_violations(text: str, names: set[str], statuses: set[str]) -> list[str]:
    """A C source's own copies, outside comments: a quoted strategy or status name (either
    spelling of a status), or a contract enumerator given a value."""
    found = []
    text = re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))  # comments
    quoted = {f'"{n}"' for n in names | statuses}
    quoted |= {f'"{STATUS_PREFIX}{n.upper()}"' for n in statuses}
    found += [f"{q} as a literal" for q in sorted(quoted) if q in text]
    found += [f"{m.group(1)} given a value" for m in _ENUMERATOR.finditer(text)]
    return found


def test_the_smoke_c_driver_takes_names_and_statuses_from_the_header() -> None:
    _, names = _header_facts()
    driver = package_dir() / "smoke" / "mtp_smoke.c"
    text = driver.read_text(encoding="utf-8")
    assert _c_violations(text, names, _status_names()) == []
    assert "llama_mtp_status_name" in text and "llama_mtp_strategy_name" in text


def test_the_c_check_catches_what_it_looks_for() -> None:
    bad = (
        'case LLAMA_MTP_STATUS_BAD_STATE: return "LLAMA_MTP_STATUS_BAD_STATE";\n'
        'if (strstr(list, "draft-mtp")) {}\nreturn "bad_state"; /* "ok" */\n'
        "enum x {\n    LLAMA_MTP_STATUS_OK = 0\n};\n"
    )
    found = _c_violations(bad, {"draft-mtp"}, {"bad_state"})
    assert len(found) == 4, found


def _cmake_files() -> list[Path]:
    return sorted([wrapper_dir() / "CMakeLists.txt", *wrapper_dir().glob("*.cmake")])


_COMMENT = re.compile(r"^\s*#(?!include)")


def _cmake_violations(text: str, names: set[str], suffixes: set[str]) -> list[str]:
    """A CMake file's own copies, outside comments: a quoted strategy name (unquoted, the same
    words name common/'s files: ngram-cache.cpp), or an enumerator's suffix
    (a hand-written strategy list), or a contract enumerator given a value. DRAFT_MTP is the one
    the MTP API rule requires (the probes' core variant names upstream's type)."""
    text = "\n".join(line.split(" # ")[0] for line in text.splitlines() if not _COMMENT.match(line))
    found = [f"strategy name {n!r}" for n in sorted(names) if f'"{n}"' in text]
    found += [
        f"strategy {s} written out"
        for s in sorted(suffixes - {"DRAFT_MTP"})
        if re.search(rf"(?<![A-Z_]){s}(?![A-Z0-9_])", text)
    ]
    found += [f"{m.group(1)} given a value" for m in _ENUMERATOR.finditer(text)]
    return found


def _strategy_suffixes() -> set[str]:
    values, _ = _header_facts()
    return {n.removeprefix(STRATEGY_PREFIX) for n in values if n.startswith(STRATEGY_PREFIX)}


@pytest.mark.parametrize("path", _cmake_files(), ids=lambda p: p.name)
def test_the_cmake_files_keep_no_strategy_list_of_their_own(path: Path) -> None:
    _, names = _header_facts()
    text = path.read_text(encoding="utf-8")
    assert _cmake_violations(text, names, _strategy_suffixes()) == []


def test_the_cmake_check_catches_what_it_looks_for() -> None:
    bad = (
        "foreach(_type IN ITEMS DRAFT_SIMPLE NGRAM_MOD)\n# ngram-mod, a comment\n"
        'set(x "ngram-mod")  # NGRAM_SIMPLE\nCOMMON_SPECULATIVE_TYPE_DRAFT_MTP\n'
    )
    found = _cmake_violations(bad, {"ngram-mod"}, {"DRAFT_SIMPLE", "NGRAM_MOD", "DRAFT_MTP"})
    assert len(found) == 3, found


def _cmake_strategy_list(folder: Path) -> subprocess.CompletedProcess[str]:
    script = folder / "list.cmake"
    script.write_text(
        "cmake_minimum_required(VERSION 3.14)\n"
        f'include("{(folder / "upstream_probes.cmake").as_posix()}")\n'
        "llama_mtp_strategy_suffixes(found)\n"
        'message(STATUS "strategies: ${found}")\n',
        encoding="utf-8",
    )
    return subprocess.run(["cmake", "-P", str(script)], capture_output=True, text=True, check=False)


def test_cmake_reads_the_strategy_list_from_the_header(tmp_path: Path) -> None:
    """The probes' list is the header's enumerators, in its order; a header CMake cannot read
    stops the configure with a message that names it."""
    if shutil.which("cmake") is None:
        pytest.fail("cmake is not installed")
    for name in ("upstream_probes.cmake", "llama_mtp.h"):
        shutil.copy(wrapper_dir() / name, tmp_path / name)
    done = _cmake_strategy_list(tmp_path)
    assert done.returncode == 0, done.stderr
    text = HEADER.read_text(encoding="utf-8")
    order = [n.removeprefix(STRATEGY_PREFIX) for n, _ in _ENUMERATOR.findall(text)
             if n.startswith(STRATEGY_PREFIX)]  # fmt: skip
    assert f"strategies: {';'.join(order)}" in done.stdout + done.stderr
    header = tmp_path / "llama_mtp.h"
    header.write_text(text.replace("LLAMA_MTP_STRATEGY_", "LLAMA_MTP_KIND_"), encoding="utf-8")
    failed = _cmake_strategy_list(tmp_path)
    assert failed.returncode != 0
    assert "no strategy enumerators" in failed.stderr and "llama_mtp.h" in failed.stderr


def test_the_default_draft_length_has_one_home() -> None:
    """LLAMA_MTP_DRAFT_DEFAULT: the wrapper's C sources and the runtime use the macro, the tool
    reads it from the header; no other place writes the number as a draft default."""
    value = header_macro("LLAMA_MTP_DRAFT_DEFAULT")
    assert 1 <= value <= header_macro("LLAMA_MTP_DRAFT_MAX")
    sidecar = (wrapper_dir() / "llama_mtp_sidecar.cpp").read_text(encoding="utf-8")
    upstream = (wrapper_dir() / "llama_mtp_upstream.h").read_text(encoding="utf-8")
    assert "n_max = LLAMA_MTP_DRAFT_DEFAULT;" in sidecar
    assert "n_max = LLAMA_MTP_DRAFT_DEFAULT;" in upstream
    own = re.compile(rf"(n_max|draft_token_max|draft_max)\b[^=\n]*=\s*{value}\b|default={value}\b")
    for path in sorted(package_dir().rglob("*")):
        if path.suffix in (".py", ".c", ".cpp", ".h", ".j2") and path.is_file():
            text = path.read_text(encoding="utf-8")
            assert not own.search(text), f"{path.relative_to(package_dir())} writes the default"
    assert own.search("    draft_token_max: int = 3\n") and own.search("default=3)")


def test_the_python_floor_and_the_package_name_are_written_once() -> None:
    """PYTHON_FLOOR (generator/__init__.py) is pyproject's requires-python and the wheels' and
    CI's Python; the bindings' package name is emit's PACKAGE_NAME, which the other modules
    import."""
    import tomllib

    from generator import PYTHON_FLOOR
    from generator.emit import PACKAGE_NAME
    from generator.release import ci_matrix, wheels
    from tests.repo import REPO_ROOT

    floor = "{}.{}".format(*PYTHON_FLOOR)
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["requires-python"] == f">={floor}" == wheels.REQUIRES_PYTHON
    assert ci_matrix.PYTHON_VERSION == floor
    quoted = re.compile(rf"[\"']{re.escape(PACKAGE_NAME)}[\"']")
    for path in sorted(package_dir().rglob("*.py")):
        if shipped_dir() in path.parents or path.name == "driver.py":  # driver.py: the target's
            continue
        text = path.read_text(encoding="utf-8")
        own = [line for line in text.splitlines() if quoted.search(line)]
        if path == package_dir() / "emit" / "__init__.py":
            assert own == [f'PACKAGE_NAME = "{PACKAGE_NAME}"'], own
        else:
            assert not own, f"{path.relative_to(package_dir())} writes the package name: {own}"
