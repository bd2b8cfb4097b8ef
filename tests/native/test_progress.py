"""Live progress lines (``generator.progress``): on a terminal outside CI a build shows one live
line with its steps and elapsed time and a long program an elapsed-time line; in CI or when
stderr is not a terminal the plain lines are the same as ever."""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

import pytest

from generator import progress
from generator.native.cmake_driver import run_step

NINJA_LINES = "".join(f"[{i}/4] compile part {i}\n" for i in range(1, 5))
FAKE_NINJA = [sys.executable, "-c", f"import sys; sys.stdout.write({NINJA_LINES!r})"]


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_live_only_on_a_terminal_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert progress.live(Terminal())
    assert not progress.live(io.StringIO())
    monkeypatch.setenv("CI", "true")
    assert not progress.live(Terminal())
    monkeypatch.delenv("CI")
    monkeypatch.setenv("TERM", "dumb")
    assert not progress.live(Terminal())


def test_a_build_step_on_a_terminal_is_one_live_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    run_step("build x: compile", FAKE_NINJA, tmp_path / "log", {})
    text = err.getvalue()
    assert "\r" in text and "4/4 steps" in text  # redrawn in place, with the step count
    assert "step 1/4" not in text  # not the plain lines
    assert "compile part 4" in (tmp_path / "log").read_text()


def test_a_build_step_piped_prints_the_plain_lines(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TERM", "xterm")
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    run_step("build x: compile", FAKE_NINJA, tmp_path / "log", {})
    lines = err.getvalue().splitlines()
    assert lines[1:] == [f"build x: compile: step {i}/4" for i in range(1, 5)]
    assert "\r" not in err.getvalue()


def test_a_long_program_shows_its_elapsed_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(progress, "TICK_S", 0.05)
    err = Terminal()
    with progress.ticking("smoke: under wine", err):
        time.sleep(0.3)
    assert err.getvalue().count("smoke: under wine [00:00]") >= 2  # redrawn while it ran
    quiet = io.StringIO()
    with progress.ticking("smoke: under wine", quiet):
        pass
    assert quiet.getvalue() == ""
