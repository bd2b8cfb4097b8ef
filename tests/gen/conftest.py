"""Fixtures for the generator tests: each real tree is parsed once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.emit import emit_package
from generator.ir import Interface
from generator.parse.frontend import ParseOptions, parse_interface, tree_source
from generator.sources.licenses import llama_license

DATA = Path(__file__).resolve().parent / "data"
FAKE_WRAPPER = DATA / "llama_mtp_fake.h"


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
