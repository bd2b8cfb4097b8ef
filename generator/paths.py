"""Where things live: the repository checkout and the cache directory."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

CACHE_ENV = "LLAMA_BINDGEN_CACHE"


def repo_root() -> Path:
    """The checkout this package runs from (the folder holding ``pyproject.toml``)."""
    return Path(__file__).resolve().parent.parent


def templates_dir() -> Path:
    return repo_root() / "templates"


def default_cache_dir() -> Path:
    """``$LLAMA_BINDGEN_CACHE`` if set, else the per-user cache folder of the platform."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser().resolve()
    return Path(platformdirs.user_cache_dir("llama-bindgen")).resolve()
