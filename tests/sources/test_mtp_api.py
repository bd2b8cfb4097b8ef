"""The MTP API rule: one data file, read by llama-bindgen and by the wrapper's CMake project."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from generator.paths import wrapper_dir
from generator.sources import mtp_api
from generator.sources.tree import mtp_api_missing_reason


def _tree_with_the_api(root: Path) -> Path:
    """A tree whose files satisfy every line of the rule, written from the rule itself."""
    for need in mtp_api.rule():
        target = root / need.path
        target.parent.mkdir(parents=True, exist_ok=True)
        text = "" if need.text == mtp_api.NO_TEXT else need.text
        with target.open("a", encoding="utf-8") as out:
            out.write(f"/* {text} */\n")
    return root


def test_the_rule_file_is_the_wrappers() -> None:
    assert (wrapper_dir() / mtp_api.RULE_FILE).is_file()
    lines = mtp_api.rule()
    assert [n.text for n in lines if n.path == "include/llama.h"] == [
        "LLAMA_CONTEXT_TYPE_MTP",
        "n_rs_seq",
    ]
    # CMake splits each line on '|' into a list: a ';' in a field would split it again
    assert all(";" not in f"{n.path}{n.text}{n.reason}" for n in lines)


def test_a_tree_with_every_line_has_the_api(tmp_path: Path) -> None:
    assert mtp_api.missing_reason(_tree_with_the_api(tmp_path)) is None
    assert mtp_api_missing_reason(tmp_path) is None


@pytest.mark.parametrize("index", range(len(mtp_api.rule())))
def test_each_line_that_fails_is_the_reason(tmp_path: Path, index: int) -> None:
    tree = _tree_with_the_api(tmp_path)
    need = mtp_api.rule()[index]
    target = tree / need.path
    if need.text == mtp_api.NO_TEXT:
        target.unlink()
    else:
        target.write_text(target.read_text().replace(need.text, "gone"))
    assert mtp_api.missing_reason(tree) == need.reason


def test_the_real_pinned_tree_has_the_api(tree_pin: Path) -> None:
    assert mtp_api.missing_reason(tree_pin) is None


def test_a_tree_without_common_is_refused(tmp_path: Path) -> None:
    tree = _tree_with_the_api(tmp_path)
    shutil.rmtree(tree / "common")
    assert mtp_api.missing_reason(tree) == "common/speculative.h is missing"
