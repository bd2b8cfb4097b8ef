"""The runtime imported from the committed ``generated/`` package, with no native build and no
library loaded: for what the runtime checks in Python before anything native runs."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.repo import REPO_ROOT

BINDINGS_PARENT = REPO_ROOT / "generated"


def committed_runtime() -> Any:
    """``llama_bindings.runtime`` from ``generated/`` (the committed package, kept current by
    tests/gen/test_emit.py); importing it opens no library."""
    if str(BINDINGS_PARENT) not in sys.path:
        sys.path.insert(0, str(BINDINGS_PARENT))
    module = importlib.import_module("llama_bindings.runtime")
    package = Path(module.__file__).resolve().parent  # llama_bindings/runtime/
    assert package.parent.parent == BINDINGS_PARENT.resolve()
    return module


@pytest.fixture(scope="session")
def runtime() -> Any:
    """The generated ``llama_bindings.runtime`` package (nothing built, nothing loaded)."""
    return committed_runtime()
