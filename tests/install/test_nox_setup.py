"""The nox sessions bring CMake and Ninja from PyPI when the machine has none."""

from __future__ import annotations

import functools
import importlib.util
from types import ModuleType

import pytest

from tests.repo import REPO_ROOT


class RecordingSession:
    def __init__(self) -> None:
        self.installed: list[tuple[str, ...]] = []
        self.logged: list[str] = []

    def install(self, *args: str) -> None:
        self.installed.append(args)

    def log(self, text: str) -> None:
        self.logged.append(text)


@functools.cache  # nox keeps a registry of sessions: load the file once
def _noxfile() -> ModuleType:
    spec = importlib.util.spec_from_file_location("project_noxfile", REPO_ROOT / "noxfile.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("on_path", "expected"),
    [({"cmake", "ninja"}, []), ({"ninja"}, [("cmake",)]), (set(), [("cmake", "ninja")])],
)
def test_missing_build_tools_come_from_pypi(
    monkeypatch: pytest.MonkeyPatch, on_path: set[str], expected: list[tuple[str, ...]]
) -> None:
    noxfile = _noxfile()
    monkeypatch.setattr(
        noxfile.shutil, "which", lambda tool: f"/usr/bin/{tool}" if tool in on_path else None
    )
    session = RecordingSession()
    noxfile._install(session)
    assert session.installed[0] == ("-e", ".[dev]")
    assert session.installed[1:] == expected
    assert bool(session.logged) == bool(expected)


def test_the_session_tools_are_the_ones_the_build_runs() -> None:
    source = (REPO_ROOT / "generator" / "native" / "build.py").read_text()
    for tool in _noxfile().BUILD_TOOLS:
        assert f'"{tool}"' in source, f"the build no longer runs {tool}"
