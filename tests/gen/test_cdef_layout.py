"""The cdef: cffi accepts it, and cffi's layouts equal clang's for the host, struct by struct."""

from __future__ import annotations

from typing import Any

import cffi
import pytest

from generator.emit.cdef import Cdef, build_cdef
from generator.ir import Interface
from tests.gen.host import host_triple

# cffi warns when it has to guess (e.g. an enum it never saw defined): that is a failure
pytestmark = pytest.mark.filterwarnings("error")


def _ffi(cdef: Cdef) -> Any:
    ffi = cffi.FFI()
    ffi.cdef("\n".join([*cdef.forward_declarations, *cdef.enums, *cdef.types, *cdef.functions]))
    return ffi


@pytest.fixture(scope="module", params=["api_b11312", "api_63d93d1", "api_b11312_wrapper"])
def api(request: pytest.FixtureRequest) -> Interface:
    found: Interface = request.getfixturevalue(request.param)
    return found


def test_cffi_layout_equals_clang_for_every_struct(api: Interface) -> None:
    cdef = build_cdef(api)
    ffi = _ffi(cdef)
    triple = host_triple()
    checked = 0
    mismatches: list[str] = []
    for record in cdef.bound_records:
        if record.opaque:
            continue
        layout = record.layouts[triple]
        if ffi.sizeof(record.c_name) != layout.size:
            mismatches.append(
                f"sizeof({record.c_name}): {ffi.sizeof(record.c_name)} != {layout.size}"
            )
        if ffi.alignof(record.c_name) != layout.align:
            mismatches.append(f"alignof({record.c_name})")
        for item in layout.fields:
            if item.bit_width is None and ffi.offsetof(record.c_name, item.name) != item.offset:
                mismatches.append(f"offsetof({record.c_name}, {item.name})")
        checked += 1
    assert not mismatches
    assert checked == sum(1 for r in api.records if not r.opaque)


def test_context_params_carry_mtp_fields_at_clang_offsets(api_b11312: Interface) -> None:
    ffi = _ffi(build_cdef(api_b11312))
    record = api_b11312.record("llama_context_params")
    assert record is not None
    layout = record.layouts[host_triple()]
    for name in ("ctx_type", "n_rs_seq"):
        field = layout.field(name)
        assert field is not None
        assert ffi.offsetof("struct llama_context_params", name) == field.offset


def test_every_bound_function_type_is_buildable(api: Interface) -> None:
    cdef = build_cdef(api)
    ffi = _ffi(cdef)
    for function in cdef.bound_functions:
        params = ", ".join(p.type.declare() for p in function.params) or "void"
        ffi.typeof(function.result.declare(f"(*)({params})"))


def test_enum_constants_in_cdef_equal_clang(api: Interface) -> None:
    ffi = _ffi(build_cdef(api))
    lib = ffi.dlopen(None)  # enum constants come from the cdef, not from a library
    for enum in api.enums:
        for member in enum.members:
            assert getattr(lib, member.name) == member.value, member.name


def test_unbindable_declarations_are_reported(api_b11312: Interface) -> None:
    cdef = build_cdef(api_b11312)
    bound = {f.name for f in cdef.bound_functions}
    reported = {u.name for u in cdef.unsupported if u.kind == "function"}
    every = {f.name for f in api_b11312.functions}
    assert bound | reported == every and not bound & reported
    variadic = {f.name for f in api_b11312.functions if f.variadic}
    assert variadic and variadic <= reported
