"""The mtmd rule (``native_wrapper/mtmd_rule.txt``, read by ``sources/mtmd_api.py``): which trees
are bound with libmtmd, and the reason given for the others, as the parse records it."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.parse.options import ParseOptions
from generator.sources import mtmd_api

CMAKE = "set(MTMD_PUBLIC_HEADERS\n    ${{CMAKE_CURRENT_SOURCE_DIR}}/{0}\n    )\n"


def _tree(root: Path, headers: tuple[str, ...], listed: tuple[str, ...] | None) -> Path:
    folder = root / mtmd_api.rule().folder
    folder.mkdir(parents=True)
    for name in headers:
        (folder / name).write_text("/* stand-in */\n", encoding="utf-8")
    if listed is not None:
        body = "\n    ${CMAKE_CURRENT_SOURCE_DIR}/".join(listed)
        (folder / "CMakeLists.txt").write_text(CMAKE.format(body), encoding="utf-8")
    return root


def test_the_rule_names_the_public_headers_in_include_order() -> None:
    rule = mtmd_api.rule()
    assert (rule.folder, rule.cmake_list) == ("tools/mtmd", "MTMD_PUBLIC_HEADERS")
    assert rule.headers == ("mtmd.h", "mtmd-helper.h")


def test_a_tree_that_has_them(tmp_path: Path) -> None:
    root = _tree(tmp_path, ("mtmd.h", "mtmd-helper.h", "clip.h"), ("mtmd.h", "mtmd-helper.h"))
    found, reason = mtmd_api.headers(root)
    assert reason is None
    assert [p.name for p in found] == ["mtmd.h", "mtmd-helper.h"]
    options = ParseOptions(root, with_rpc=False)  # the mtmd rule alone
    assert options.absent_libraries() == ()
    assert options.entry_text().splitlines()[1:] == [
        '#include "mtmd.h"',
        '#include "mtmd-helper.h"',
    ]
    assert ParseOptions(root, with_mtmd=False).mtmd_headers == ()


@pytest.mark.parametrize(
    ("headers", "listed", "says"),
    [
        (None, None, "has no tools/mtmd (it predates libmtmd)"),
        (("mtmd.h",), ("mtmd.h",), "tools/mtmd has no mtmd-helper.h"),
        (("mtmd.h", "mtmd-helper.h"), None, "sets no MTMD_PUBLIC_HEADERS"),
        (
            ("mtmd.h", "mtmd-helper.h", "mtmd-video.h"),
            ("mtmd.h", "mtmd-helper.h", "mtmd-video.h"),
            "(MTMD_PUBLIC_HEADERS: mtmd.h, mtmd-helper.h, mtmd-video.h) are not the rule's",
        ),
    ],
)
def test_other_trees_are_reported(
    tmp_path: Path,
    headers: tuple[str, ...] | None,
    listed: tuple[str, ...] | None,
    says: str,
) -> None:
    root = tmp_path if headers is None else _tree(tmp_path, headers, listed)
    found, reason = mtmd_api.headers(root)
    assert found == () and reason is not None and says in reason
    assert ParseOptions(root, with_rpc=False).absent_libraries() == (("mtmd", reason),)


def test_the_pinned_tree_has_them(tree_pin: Path) -> None:
    found, reason = mtmd_api.headers(tree_pin)
    assert reason is None and len(found) == 2
