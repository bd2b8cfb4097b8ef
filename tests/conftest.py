"""Shared fixtures. Trees come from the cache `llama-bindgen fetch` fills (.ci/run fills it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.trees import llama_tree


@pytest.fixture(scope="session")
def tree_b11312() -> Path:
    """The verified b11312 tree (MTP API present)."""
    return llama_tree("b11312")


@pytest.fixture(scope="session")
def tree_63d93d1() -> Path:
    """The verified pre-MTP tree at commit 63d93d1."""
    return llama_tree("63d93d1")
