"""Shapes that need care, from a small header: what is bound matches clang, and what cannot be
bound is reported with a reason, never dropped silently."""

from __future__ import annotations

import json
import shutil
from typing import Any

import cffi
import pytest

from generator.emit.cdef import build_cdef
from generator.ir import Interface
from generator.parse.frontend import ParseOptions, parse_interface, tree_source
from tests.gen.conftest import DATA
from tests.gen.host import host_triple

# cffi warns when it has to guess (e.g. an enum it never saw defined): that is a failure
pytestmark = pytest.mark.filterwarnings("error")


@pytest.fixture(scope="module")
def tricky(tmp_path_factory: pytest.TempPathFactory) -> Interface:
    tree = tmp_path_factory.mktemp("tricky")
    (tree / "include").mkdir()
    (tree / "ggml" / "include").mkdir(parents=True)
    shutil.copy2(DATA / "tricky_llama.h", tree / "include" / "llama.h")
    meta = {"tag": "tricky", "commit": "1" * 40, "digest": "sha256:1"}
    (tree / ".llama-bindgen-tree.json").write_text(json.dumps(meta), encoding="utf-8")
    return parse_interface(
        ParseOptions(tree, targets=("x86_64-linux-gnu", "i686-pc-windows-msvc")),
        tree_source(tree),
    )


def _ffi(api: Interface) -> Any:
    cdef = build_cdef(api)
    ffi = cffi.FFI()
    ffi.cdef("\n".join([*cdef.forward_declarations, *cdef.enums, *cdef.types, *cdef.functions]))
    return ffi


def test_reasons_for_everything_left_out(tricky: Interface) -> None:
    cdef = build_cdef(tricky)
    reasons = {u.name: u.reason for u in cdef.unsupported}
    assert "variadic" in reasons["tricky_printf"]
    assert "union" in reasons["tricky_union_result"]
    assert "union" in reasons["tricky_union_param"]
    assert "union" in reasons["tricky_holds"]
    assert "union" in reasons["tricky_sum"]  # by value, and it holds an anonymous union
    assert "bit-field" in reasons["tricky_bits_result"]
    assert "va_list" in reasons["tricky_log"]
    assert "va_list" in reasons["tricky_vlog"]  # through the typedef
    assert "static" in reasons["tricky_inline"]
    assert "va_list" in reasons["tricky_with_va"] and "opaque" in reasons["tricky_with_va"]
    assert "tricky_with_va" in reasons["tricky_outer"]  # holds it by value
    assert "tricky_by_pointer" not in reasons  # a pointer needs no layout
    assert "va_list" in reasons["tricky_tagless_va"]
    assert "tricky_tagless_va" in reasons["tricky_tagless_va_ptr"]
    assert "layout is not known" in reasons["tricky_outer_value"]
    bound = {f.name for f in cdef.bound_functions}
    assert bound == {"tricky_plain_result", "tricky_outer_pointer"}
    opaque = {r.name for r in cdef.bound_records if r.opaque}
    assert {"tricky_with_va", "tricky_outer"} <= opaque
    assert {m.name for m in tricky.skipped_macros} == {"TRICKY_STR"}


def test_constants_and_nested_enum(tricky: Interface) -> None:
    values = {c.name: c.value for c in tricky.constants}
    assert values == {"TRICKY_A": 3, "TRICKY_B": 48, "TRICKY_NEG": -48}
    kind = tricky.enum("tricky_kind")
    assert kind is not None
    assert [(m.name, m.value) for m in kind.members] == [
        ("TRICKY_K0", 0),
        ("TRICKY_K1", 5),
        ("TRICKY_K2", 6),
    ]


def test_cffi_layout_equals_clang(tricky: Interface) -> None:
    ffi = _ffi(tricky)
    triple = host_triple()
    for record in build_cdef(tricky).bound_records:
        if record.opaque:
            continue
        layout = record.layouts[triple]
        assert ffi.sizeof(record.c_name) == layout.size, record.name
        assert ffi.alignof(record.c_name) == layout.align, record.name
        for item in layout.fields:
            if item.bit_width is None:
                assert ffi.offsetof(record.c_name, item.name) == item.offset, item.name
    bits = tricky.record("tricky_bits")
    assert bits is not None
    layout = bits.layouts[triple]
    assert [f.bit_width for f in layout.fields] == [3, 5, 24, None, 1]
    assert [f.bit_offset for f in layout.fields[:3]] == [0, 3, 8]


def test_extra_target_gets_its_own_layout(tricky: Interface) -> None:
    nested = tricky.record("tricky_nested")
    assert nested is not None
    wide, narrow = nested.layouts["x86_64-linux-gnu"], nested.layouts["i686-pc-windows-msvc"]
    # 32-bit pointers: the callback fields sit earlier and the struct is smaller
    assert narrow.size < wide.size
    pick_wide, pick_narrow = wide.field("pick"), narrow.field("pick")
    assert pick_wide is not None and pick_narrow is not None
    assert pick_narrow.offset < pick_wide.offset
