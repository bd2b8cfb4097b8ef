"""Fixtures for the real-model tests: the runtime and host build of tests/mtp, upstream's own
example programs built from the same tree, and Gemma 3 270M loaded once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from generator.errors import BindgenError
from generator.verify.upstream_drivers import UpstreamDrivers, build_upstream_drivers
from tests.mtp.conftest import host_build, libs, runtime

__all__ = ["host_build", "libs", "runtime"]  # the same fixtures as tests/mtp's


@pytest.fixture(scope="session")
def upstream(tree_pin: Path, host_build: Any) -> UpstreamDrivers:
    """llama-simple and llama-speculative-simple of the pinned tree, running on the host build."""
    try:
        return build_upstream_drivers(tree_pin, host_build.lib_dir)
    except BindgenError as exc:
        pytest.fail(f"upstream's example programs did not build: {exc}")


@pytest.fixture(scope="session")
def gemma(runtime: Any, libs: Any, gemma_model: Path) -> Iterator[Any]:
    """Gemma 3 270M loaded with the runtime."""
    with runtime.Model(gemma_model, libs=libs) as model:
        yield model
