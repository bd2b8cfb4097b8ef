"""A forward-declared enum that is never defined (``enum Qux;``, a GNU extension some C headers
use) is listed in the generation report with its reason, and so is every function that uses it:
nothing is dropped silently, and cffi is never left to guess its size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from generator.emit import render_files
from generator.emit.cdef import build_cdef
from generator.ir import Interface
from generator.parse.declarations import INCOMPLETE_ENUM_REASON
from generator.parse.frontend import ParseOptions, parse_interface, tree_source

HEADER = """\
#pragma once
enum Qux;                                /* declared, never defined */
enum defined_later;                      /* declared first, defined below: bound */
enum defined_later { LATER_A = 1 };
struct holder { enum Qux * qux; int n; };
void qux_by_pointer(enum Qux * qux);
enum Qux qux_result(void);
void later(enum defined_later value);
"""


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Interface:
    tree = tmp_path_factory.mktemp("incomplete")
    (tree / "include").mkdir()
    (tree / "ggml" / "include").mkdir(parents=True)
    (tree / "include" / "llama.h").write_text(HEADER, encoding="utf-8")
    meta = {"tag": "incomplete", "commit": "2" * 40, "digest": "sha256:2"}
    (tree / ".llama-bindgen-tree.json").write_text(json.dumps(meta), encoding="utf-8")
    return parse_interface(ParseOptions(tree, targets=("x86_64-linux-gnu",)), tree_source(tree))


def test_the_incomplete_enum_is_recorded_and_survives_the_ir(api: Interface) -> None:
    assert [(e.name, e.header, e.reason) for e in api.incomplete_enums] == [
        ("Qux", "llama.h", INCOMPLETE_ENUM_REASON)
    ]
    assert api.enum("Qux") is None and api.enum("defined_later") is not None
    assert Interface.loads(api.dumps()) == api


def test_it_and_its_uses_are_listed_not_bound(api: Interface) -> None:
    cdef = build_cdef(api)
    listed = {(u.kind, u.name): u.reason for u in cdef.unsupported}
    assert listed[("enum", "Qux")] == INCOMPLETE_ENUM_REASON
    assert "enum Qux" in listed[("function", "qux_by_pointer")]
    assert "enum Qux" in listed[("function", "qux_result")]
    assert "enum Qux" in listed[("record", "holder")]
    assert {f.name for f in cdef.bound_functions} == {"later"}


def test_the_report_says_so(api: Interface, tmp_path: Path) -> None:
    rendered, _ = render_files(api)
    report = rendered["GENERATION_REPORT.md"]
    assert "| enum | `Qux` | llama.h | incomplete enum: declared but never defined" in report
    assert "`qux_by_pointer`" in report
    # the tree has no tools/mtmd: libmtmd is listed too, and the loader says why it is absent
    assert "| mtmd | the tree has no tools/mtmd (it predates libmtmd) |" in report
    assert 'MTMD_API: Final = False\nMTMD_ABSENT: Final = "the tree has no tools/mtmd' in (
        rendered["_about.py"].replace('# why they do not ("" when they do)\n', "")
    )
