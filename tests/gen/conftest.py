"""Fixtures for the generator tests: each real tree is parsed once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.ir import Interface
from generator.parse.frontend import ParseOptions, parse_interface, tree_source

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
