"""The diff on the real pre-MTP -> MTP pair, and its classification rules."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from generator.cli import main
from generator.diff import ApiDiff, Change, compare
from generator.diff.report import render_json, render_markdown
from generator.emit import emit_package
from generator.ir import CType, EnumMember, Interface
from generator.sources.licenses import llama_license


@pytest.fixture(scope="module")
def mtp_diff(api_63d93d1: Interface, api_b11312: Interface) -> ApiDiff:
    return compare(api_63d93d1, api_b11312)


def _change(diff: ApiDiff, kind: str, name: str) -> Change:
    found = [c for c in diff.changes if c.kind == kind and c.name == name]
    assert len(found) == 1, f"{kind} {name}: {found}"
    return found[0]


def test_mtp_api_changes_are_reported(mtp_diff: ApiDiff, api_b11312: Interface) -> None:
    enum = _change(mtp_diff, "enum", "llama_context_type")
    assert enum.action == "added" and not enum.breaking
    function = _change(mtp_diff, "function", "llama_n_rs_seq")
    assert function.action == "added" and not function.breaking

    params = _change(mtp_diff, "struct", "llama_context_params")
    assert params.action == "changed" and params.breaking
    added = {d.name for d in params.details if d.what == "field added"}
    assert {"ctx_type", "n_rs_seq"} <= added
    moved = {d.name: d for d in params.details if d.what == "field moved"}
    # the offset shift: fields after n_rs_seq moved, on every target, by what clang says
    record = api_b11312.record("llama_context_params")
    assert record is not None
    for target, layout in record.layouts.items():
        shifted = [d for d in moved.values() if target in d.targets]
        assert shifted, target
        for detail in shifted:
            new = layout.field(detail.name)
            assert new is not None and detail.new == str(new.offset)
    assert "n_threads" in moved
    assert any(d.what == "size" for d in params.details)

    model = _change(mtp_diff, "struct", "llama_model_params")
    assert "load_mtp" in {d.name for d in model.details if d.what == "field added"}


def test_markdown_and_json_name_every_mtp_change(mtp_diff: ApiDiff) -> None:
    markdown = render_markdown(mtp_diff)
    for name in ("llama_context_type", "ctx_type", "n_rs_seq", "load_mtp", "llama_n_rs_seq"):
        assert f"`{name}`" in markdown, name
    assert "ABI-breaking" in markdown and "field moved" in markdown
    data = json.loads(render_json(mtp_diff))
    assert data["breaking"] is True
    names = {c["name"] for c in data["changes"]}
    assert {"llama_context_type", "llama_context_params", "llama_model_params"} <= names
    assert "llama_n_rs_seq" in names


def test_identical_inputs_give_no_changes(api_b11312: Interface) -> None:
    assert compare(api_b11312, api_b11312).changes == ()


def test_enum_renumbering_is_breaking_and_addition_is_not(api_b11312: Interface) -> None:
    enum = api_b11312.enum("llama_context_type")
    assert enum is not None
    renumbered = replace(enum, members=(enum.members[0], replace(enum.members[1], value=5)))
    extended = replace(enum, members=(*enum.members, EnumMember("LLAMA_CONTEXT_TYPE_X", 2)))
    for edited, breaking in ((renumbered, True), (extended, False)):
        enums = tuple(edited if e.name == enum.name else e for e in api_b11312.enums)
        other = replace(api_b11312, enums=enums)
        change = _change(compare(api_b11312, other), "enum", "llama_context_type")
        assert change.breaking is breaking


def test_function_removal_is_breaking(api_b11312: Interface) -> None:
    functions = tuple(f for f in api_b11312.functions if f.name != "llama_n_rs_seq")
    smaller = replace(api_b11312, functions=functions)
    change = _change(compare(api_b11312, smaller), "function", "llama_n_rs_seq")
    assert change.action == "removed" and change.breaking


def test_cli_diff_tree_against_generated_package(
    tree_63d93d1: Path, api_b11312: Interface, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    licence = llama_license(tree_63d93d1)  # any tree's: the diff does not read it
    package = emit_package(api_b11312, tmp_path / "gen", llama_license=licence).package_dir
    report = tmp_path / "diff.json"
    code = main(["diff", str(tree_63d93d1), str(package), "--json", str(report)])
    assert code == 0
    out = capsys.readouterr().out
    assert "`llama_n_rs_seq`" in out
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["new"]["commit"] == api_b11312.source.commit
    assert main(["diff", str(package / "ir.json"), str(package), "--json", str(report),
                 "--fail-on-breaking"]) == 0  # fmt: skip
    assert main(["diff", str(tree_63d93d1), str(package / "ir.json"), "--json", str(report),
                 "--fail-on-breaking"]) == 3  # fmt: skip


def test_wrapper_on_one_side_only_is_left_out(
    api_b11312: Interface, api_b11312_wrapper: Interface
) -> None:
    auto = compare(api_b11312, api_b11312_wrapper)
    assert auto.changes == () and auto.notes
    included = compare(api_b11312, api_b11312_wrapper, wrapper="include")
    added = {c.name for c in included.changes if c.action == "added"}
    assert {"llama_mtp_init", "llama_mtp_params", "llama_mtp_status"} <= added
    both = compare(api_b11312_wrapper, api_b11312_wrapper)
    assert both.changes == () and not both.notes


def test_spelling_only_type_changes_are_compatible(api_b11312: Interface) -> None:
    function = api_b11312.function("llama_n_rs_seq")
    assert function is not None and function.result.declare() == "uint32_t"
    respelled = replace(function, result=CType.builtin("unsigned int"))
    widened = replace(function, result=CType.builtin("uint64_t"))
    for edited, breaking in ((respelled, False), (widened, True)):
        functions = tuple(edited if f.name == function.name else f for f in api_b11312.functions)
        other = replace(api_b11312, functions=functions)
        change = _change(compare(api_b11312, other), "function", "llama_n_rs_seq")
        assert change.breaking is breaking


def test_an_optional_library_on_one_side_only_is_noted(api_b11312: Interface) -> None:
    """A side without ggml-rpc.h (its reason recorded) against one with it: the RPC functions are
    all removed, and a note says which side lacks libggml-rpc and why."""
    why = "the tree has no ggml/include/ggml-rpc.h (it predates ggml's RPC backend)"
    without = replace(
        api_b11312,
        functions=tuple(f for f in api_b11312.functions if f.library != "ggml_rpc"),
        absent_libraries=(("ggml_rpc", why),),
    )
    diff = compare(api_b11312, without)
    assert f"libggml-rpc (ggml-rpc.h) is removed: the new side lacks it ({why})" in diff.notes
    removed = {c.name for c in diff.changes if c.kind == "function"}
    assert "ggml_backend_rpc_init" in removed
    assert compare(without, api_b11312).notes[-1].startswith("libggml-rpc (ggml-rpc.h) is added")
