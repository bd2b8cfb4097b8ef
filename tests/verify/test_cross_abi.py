"""The cross-ABI report emitted beside the bindings: every target, and what moves between them."""

from __future__ import annotations

from pathlib import Path

from generator.emit import emit_package
from generator.parse.frontend import parse_interface, tree_source
from generator.parse.options import DEFAULT_TARGETS, ParseOptions
from generator.sources.licenses import llama_license
from tests.repo import REPO_ROOT

THIRTY_TWO_BIT = "i686-pc-windows-msvc"


def test_committed_report_covers_every_target() -> None:
    text = (REPO_ROOT / "generated" / "llama_bindings" / "CROSS_ABI.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("| record |"))
    for target in DEFAULT_TARGETS:
        assert f" {target} " in header
    assert "| `struct llama_context_params` |" in text


def test_fields_that_move_between_targets_are_listed(tree_b11312: Path, tmp_path: Path) -> None:
    options = ParseOptions(tree_b11312, None, (*DEFAULT_TARGETS, THIRTY_TWO_BIT))
    api = parse_interface(options, tree_source(tree_b11312))
    emit_package(api, tmp_path, llama_license=llama_license(tree_b11312))
    text = (tmp_path / "llama_bindings" / "CROSS_ABI.md").read_text()
    section = text.split("## Fields whose offset differs between targets", 1)[1]
    row = next(
        line for line in section.splitlines()
        if line.startswith("| `struct llama_context_params.abort_callback_data` |")
    )  # fmt: skip
    record = api.record("llama_context_params")
    assert record is not None
    expected = [
        str(record.layouts[t].field("abort_callback_data").offset)  # type: ignore[union-attr]
        for t in api.targets
    ]
    assert row.split("|")[2:-1] == [f" {e} " for e in expected]
    assert len(set(expected)) > 1
