"""The IR: JSON round trip, and what the parser must find in b11312."""

from __future__ import annotations

import json

from generator.ir import CType, Interface, Record
from generator.parse.frontend import DEFAULT_TARGETS


def test_round_trip_is_lossless_and_stable(api_b11312: Interface) -> None:
    text = api_b11312.dumps()
    again = Interface.loads(text)
    assert again == api_b11312
    assert again.dumps() == text
    # stable ordering: every list of declarations is sorted by name
    data = json.loads(text)
    for key in ("functions", "records", "enums", "typedefs", "constants"):
        names = [item["name"] for item in data[key]]
        assert names == sorted(names), key


def test_every_default_target_has_layouts(api_b11312: Interface) -> None:
    assert set(DEFAULT_TARGETS) <= set(api_b11312.targets)
    for record in api_b11312.records:
        if not record.opaque:
            assert set(record.layouts) == set(api_b11312.targets), record.name
    for enum in api_b11312.enums:
        assert set(enum.sizes) == set(api_b11312.targets), enum.name


def test_mtp_api_is_parsed(api_b11312: Interface) -> None:
    params = api_b11312.record("llama_context_params")
    assert params is not None
    names = [f.name for f in params.fields]
    assert "ctx_type" in names and "n_rs_seq" in names
    ctx_type = next(f for f in params.fields if f.name == "ctx_type")
    assert ctx_type.type == CType("enum", "llama_context_type")
    enum = api_b11312.enum("llama_context_type")
    assert enum is not None
    member = enum.member("LLAMA_CONTEXT_TYPE_MTP")
    assert member is not None and member.value == 1
    function = api_b11312.function("llama_n_rs_seq")
    assert function is not None and function.library == "llama" and function.header == "llama.h"
    model_params = api_b11312.record("llama_model_params")
    assert model_params is not None and "load_mtp" in [f.name for f in model_params.fields]


def test_constants_are_evaluated_by_clang(api_b11312: Interface) -> None:
    seed = api_b11312.constant("LLAMA_DEFAULT_SEED")
    null = api_b11312.constant("LLAMA_TOKEN_NULL")
    dims = api_b11312.constant("GGML_MAX_DIMS")
    assert seed is not None and seed.value == 0xFFFFFFFF
    assert null is not None and null.value == -1
    assert dims is not None and dims.value == 4
    # macros defined through other macros are followed
    magic = api_b11312.constant("LLAMA_SESSION_MAGIC")
    ggsn = api_b11312.constant("LLAMA_FILE_MAGIC_GGSN")
    assert magic is not None and ggsn is not None and magic.value == ggsn.value
    # strings are not integer constants: listed with a reason, not dropped silently
    assert "GGUF_MAGIC" in {m.name for m in api_b11312.skipped_macros}


def test_anonymous_union_member_layout(api_b11312: Interface) -> None:
    record = api_b11312.record("llama_model_kv_override")
    assert record is not None
    anonymous = [f for f in record.fields if f.anonymous]
    assert len(anonymous) == 1 and anonymous[0].type.kind == "union"
    layout = record.layouts["x86_64-linux-gnu"]
    union_offsets = {layout.field(n.name).offset for n in anonymous[0].members}  # type: ignore[union-attr]
    assert len(union_offsets) == 1  # members of a union share their offset


def test_deprecation_message_comes_from_clang(api_b11312: Interface) -> None:
    deprecated = [f for f in api_b11312.functions if f.deprecated is not None]
    assert deprecated
    assert any(f.deprecated for f in deprecated)  # messages, not just flags


def test_wrapper_functions_belong_to_llama_mtp(api_b11312_wrapper: Interface) -> None:
    mtp = [f for f in api_b11312_wrapper.functions if f.name.startswith("llama_mtp_")]
    assert {f.name for f in mtp} == {
        "llama_mtp_default_params",
        "llama_mtp_init",
        "llama_mtp_draft",
        "llama_mtp_free",
    }
    assert all(f.library == "llama_mtp" and f.header == "llama_mtp_fake.h" for f in mtp)
    handle = api_b11312_wrapper.record("llama_mtp")
    assert handle is not None and handle.opaque
    status = api_b11312_wrapper.enum("llama_mtp_status")
    assert status is not None and status.member("LLAMA_MTP_STATUS_ERROR") is not None
    constant = api_b11312_wrapper.constant("LLAMA_MTP_API_VERSION")
    assert constant is not None and constant.header == "llama_mtp_fake.h"
    llama = api_b11312_wrapper.function("llama_decode")
    assert llama is not None and llama.library == "llama"


def test_layout_attributes_round_trip_and_are_absent_by_default() -> None:
    plain = Record("struct", "s", "h.h")
    assert "layout_attributes" not in plain.to_json()  # earlier ir.json files stay as they were
    packed = Record("struct", "p", "h.h", layout_attributes=("aligned", "packed"))
    assert packed.to_json()["layout_attributes"] == ["aligned", "packed"]
    assert Record.from_json(packed.to_json()) == packed
    assert Record.from_json(plain.to_json()) == plain
