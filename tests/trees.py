"""Locate verified llama.cpp trees for tests, through the same fetcher users run.

``.ci/run`` fetches the trees first (a PyPI sdist is the offline route); the tests themselves then
hit the cache and need no network. ``$LLAMA_BINDGEN_CACHE`` selects the cache as usual.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.errors import BindgenError
from generator.releases import load_document
from generator.sources.fetch import fetch_tree
from tests.repo import REPO_ROOT

# The pinned release (releases.toml's ``pinned``): the tree generated/ is made from.
PIN: str = str(load_document(REPO_ROOT / "releases.toml").unwrap()["pinned"])


def llama_tree(ref: str) -> Path:
    try:
        return fetch_tree(ref, github_base=None).root
    except BindgenError as exc:
        pytest.fail(f"no llama.cpp tree for {ref}: run `llama-bindgen fetch {ref}` first ({exc})")
