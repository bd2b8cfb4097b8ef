"""Fixtures for the generator tests: each real tree is parsed once per session."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from generator.emit import emit_package
from generator.ir import Interface
from generator.parse.frontend import ParseOptions, parse_interface, tree_source
from generator.sources import mtmd_api, rpc_api
from generator.sources.licenses import llama_license

DATA = Path(__file__).resolve().parent / "data"
FAKE_WRAPPER = DATA / "llama_mtp_fake.h"


def copy_parsed_parts(tree: Path, dest: Path) -> Path:
    """The parts of a tree the parser reads, at another path: the headers, libmtmd's headers and
    the CMake list that names them, and what the RPC rule reads (ggml's list of installed headers,
    the backend's CMake file)."""
    shutil.copytree(tree / "include", dest / "include")
    shutil.copytree(tree / "ggml" / "include", dest / "ggml" / "include")
    shutil.copy2(tree / ".llama-bindgen-tree.json", dest / ".llama-bindgen-tree.json")
    mtmd = mtmd_api.rule()
    (dest / mtmd.folder).mkdir(parents=True)
    for name in (*mtmd.headers, "CMakeLists.txt"):
        shutil.copy2(tree / mtmd.folder / name, dest / mtmd.folder / name)
    shutil.copy2(tree / "ggml" / "CMakeLists.txt", dest / "ggml" / "CMakeLists.txt")
    (dest / rpc_api.SOURCES).mkdir(parents=True)
    shutil.copy2(tree / rpc_api.SOURCES / "CMakeLists.txt", dest / rpc_api.SOURCES)
    return dest


@pytest.fixture(scope="session")
def api_b11312(tree_b11312: Path) -> Interface:
    return parse_interface(ParseOptions(tree_b11312), tree_source(tree_b11312))


@pytest.fixture(scope="session")
def api_63d93d1(tree_63d93d1: Path) -> Interface:
    return parse_interface(ParseOptions(tree_63d93d1), tree_source(tree_63d93d1))


@pytest.fixture(scope="session")
def api_b11312_wrapper(tree_b11312: Path) -> Interface:
    options = ParseOptions(tree_b11312, wrapper_header=FAKE_WRAPPER)
    return parse_interface(options, tree_source(tree_b11312))


@pytest.fixture(scope="module")
def package(
    tmp_path_factory: pytest.TempPathFactory, api_b11312_wrapper: Interface, tree_b11312: Path
) -> Path:
    """The b11312 bindings (with the stand-in wrapper header) emitted once per test module."""
    out = tmp_path_factory.mktemp("package")
    licence = llama_license(tree_b11312)
    return emit_package(api_b11312_wrapper, out, llama_license=licence).package_dir
