"""A broken header stops generation with clang's file:line, and leaves the output untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from generator.cli import main
from generator.parse.frontend import ClangParseError, ParseOptions, parse_interface, tree_source

BROKEN = """\
#pragma once
#include <stdint.h>
struct llama_ok { int32_t a; };
struct llama_broken { llama_undeclared_t a; };
int32_t llama_f(struct llama_ok x);
"""


def _tree(folder: Path, header: str) -> Path:
    (folder / "include").mkdir(parents=True)
    (folder / "ggml" / "include").mkdir(parents=True)
    (folder / "include" / "llama.h").write_text(header, encoding="utf-8")
    (folder / "LICENSE").write_text("MIT License (test tree)\n", encoding="utf-8")
    meta = {"ref": "x", "tag": "x", "commit": "0" * 40, "digest": "sha256:0"}
    (folder / ".llama-bindgen-tree.json").write_text(json.dumps(meta), encoding="utf-8")
    return folder


def test_parse_error_names_file_and_line(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "tree", BROKEN)
    with pytest.raises(ClangParseError) as info:
        parse_interface(ParseOptions(tree, targets=("x86_64-linux-gnu",)), tree_source(tree))
    assert f"{tree / 'include' / 'llama.h'}:4:" in str(info.value)


def test_generate_leaves_output_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path / "tree", BROKEN)
    out = tmp_path / "generated"
    (out / "llama_bindings").mkdir(parents=True)
    sentinel = out / "llama_bindings" / "__init__.py"
    sentinel.write_text("# previous output\n", encoding="utf-8")
    code = main(["generate", "--tree", str(tree), "--out", str(out), "--no-wrapper"])
    assert code != 0
    assert "llama.h:4:" in capsys.readouterr().err
    assert sentinel.read_text(encoding="utf-8") == "# previous output\n"
    assert sorted(p.name for p in out.iterdir()) == ["llama_bindings"]


def test_small_valid_tree_generates(tmp_path: Path) -> None:
    header = BROKEN.replace("llama_undeclared_t a;", "int32_t a;")
    tree = _tree(tmp_path / "tree", header)
    out = tmp_path / "generated"
    assert main(["generate", "--tree", str(tree), "--out", str(out), "--no-wrapper"]) == 0
    cdef = (out / "llama_bindings" / "cdef.h").read_text(encoding="utf-8")
    assert "int32_t llama_f(struct llama_ok x);" in cdef


def test_tree_without_metadata_needs_tag_and_commit(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "tree", BROKEN.replace("llama_undeclared_t a;", "int32_t a;"))
    (tree / ".llama-bindgen-tree.json").unlink()
    out = tmp_path / "generated"
    assert main(["generate", "--tree", str(tree), "--out", str(out), "--no-wrapper"]) != 0
    assert not out.exists()
    code = main(
        ["generate", "--tree", str(tree), "--out", str(out), "--no-wrapper",
         "--tag", "t1", "--commit", "c" * 40]
    )  # fmt: skip
    assert code == 0
    assert "commit " + "c" * 40 in (out / "llama_bindings" / "enums.py").read_text()


def test_tree_without_a_licence_gives_bindings_without_one(tmp_path: Path) -> None:
    """The bindings ship llama.cpp's licence beside llama.h's doc comments when the tree has one;
    a tree without (a lean PyPI sdist's) gives bindings without it, which `release` refuses to
    ship (tests/release/test_tag_source_release.py); no licence text is made up."""
    tree = _tree(tmp_path / "tree", BROKEN.replace("llama_undeclared_t a;", "int32_t a;"))
    (tree / "LICENSE").unlink()
    out = tmp_path / "generated"
    assert main(["generate", "--tree", str(tree), "--out", str(out), "--no-wrapper"]) == 0
    assert (out / "llama_bindings" / "__init__.py").is_file()
    assert not (out / "llama_bindings" / "LICENSE-llama.cpp").exists()


def test_a_standard_header_outside_the_bundled_set_says_what_to_do(tmp_path: Path) -> None:
    header = "#pragma once\n#include <pthread.h>\nint llama_g(void);\n"
    tree = _tree(tmp_path / "tree", header)
    with pytest.raises(ClangParseError) as info:
        parse_interface(ParseOptions(tree, targets=("x86_64-linux-gnu",)), tree_source(tree))
    message = str(info.value)
    assert "'pthread.h' file not found" in message
    assert "bundled set of standard ones" in message and "math.h" in message
    assert "needs a minimal one added" in message
