"""The RPC rule (``sources/rpc_api.py``): which trees are bound with libggml-rpc, the reason given
for the others as the parse records it, and the protocol version read from the bound header."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.parse.options import ParseOptions
from generator.sources import rpc_api
from tests.trees import llama_tree

INSTALLED = "set(GGML_PUBLIC_HEADERS\n    include/ggml.h\n{0}    include/gguf.h)\n"


def _tree(root: Path, *, header: bool, sources: bool, installed: bool) -> Path:
    include = root / rpc_api.INCLUDE
    include.mkdir(parents=True)
    if header:
        (include / rpc_api.HEADER).write_text("/* stand-in */\n", encoding="utf-8")
    if sources:
        (root / rpc_api.SOURCES).mkdir(parents=True)
        (root / rpc_api.SOURCES / "CMakeLists.txt").write_text("# stand-in\n", encoding="utf-8")
    listed = f"    include/{rpc_api.HEADER}\n" if installed else ""
    (root / "ggml" / "CMakeLists.txt").write_text(INSTALLED.format(listed), encoding="utf-8")
    return root


def test_a_tree_that_has_it(tmp_path: Path) -> None:
    root = _tree(tmp_path, header=True, sources=True, installed=True)
    found, reason = rpc_api.header(root)
    assert reason is None and found == root / rpc_api.INCLUDE / rpc_api.HEADER
    options = ParseOptions(root, with_mtmd=False)
    assert options.absent_libraries() == ()
    assert options.entry_text().splitlines() == ['#include "llama.h"', '#include "ggml-rpc.h"']
    assert options.library_of(str(found)) == "ggml_rpc"
    assert options.library_of(str(root / rpc_api.INCLUDE / "ggml.h")) == "ggml"
    without = ParseOptions(root, with_mtmd=False, with_rpc=False)
    assert without.rpc_header is None and without.absent_libraries() == ()
    assert without.entry_text() == '#include "llama.h"\n'


@pytest.mark.parametrize(
    ("header", "sources", "installed", "says"),
    [
        (False, True, True, "has no ggml/include/ggml-rpc.h (it predates ggml's RPC backend)"),
        (True, False, True, "no ggml/src/ggml-rpc/CMakeLists.txt to build it from"),
        (True, True, False, "GGML_PUBLIC_HEADERS does not name ggml-rpc.h"),
    ],
)
def test_other_trees_are_reported(
    tmp_path: Path, header: bool, sources: bool, installed: bool, says: str
) -> None:
    root = _tree(tmp_path, header=header, sources=sources, installed=installed)
    found, reason = rpc_api.header(root)
    assert found is None and reason is not None and says in reason
    options = ParseOptions(root, with_mtmd=False)
    assert options.absent_libraries() == (("ggml_rpc", reason),)
    assert options.rpc_header is None and "ggml-rpc.h" not in options.entry_text()


def test_both_optional_libraries_absent_are_both_reported(tmp_path: Path) -> None:
    """A tree with neither libmtmd's headers nor ggml-rpc.h records both reasons, sorted."""
    root = _tree(tmp_path, header=False, sources=False, installed=False)
    assert [library for library, _ in ParseOptions(root).absent_libraries()] == [
        "ggml_rpc",
        "mtmd",
    ]


@pytest.mark.parametrize("ref", ["pin", "b9246"])
def test_the_real_trees_have_it(ref: str, tree_pin: Path) -> None:
    root = tree_pin if ref == "pin" else llama_tree(ref)
    found, reason = rpc_api.header(root)
    assert reason is None and found is not None and found.name == "ggml-rpc.h"
