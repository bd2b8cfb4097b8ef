"""Locate verified llama.cpp trees for tests.

Until ``llama-bindgen fetch`` lands, ``$LLAMA_BINDGEN_TEST_TREE_<REF>`` (e.g.
``LLAMA_BINDGEN_TEST_TREE_B11312``) points at an extracted tree.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def llama_tree(ref: str) -> Path:
    env = os.environ.get(f"LLAMA_BINDGEN_TEST_TREE_{ref.upper()}")
    if env and (Path(env) / "include" / "llama.h").is_file():
        return Path(env)
    pytest.fail(f"no llama.cpp tree for {ref}: run `llama-bindgen fetch {ref}` first")
