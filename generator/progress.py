"""Progress a person can follow: on a terminal, a live line (tqdm) that shows the step count and
the elapsed time of a long stage (a native build, a program under qemu or wine); in CI (``CI``
set), with ``TERM=dumb`` or when stderr is not a terminal, nothing live, and the callers' plain
lines stay as they are (logs and tests read those)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import NoReturn, TextIO

from tqdm import tqdm

TICK_S = 1.0  # how often a stage without steps redraws its elapsed time


def live(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (default stderr) gets live lines: a terminal, outside CI."""
    stream = stream if stream is not None else sys.stderr
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):  # a closed or foreign stream
        return False
    return terminal and not os.environ.get("CI") and os.environ.get("TERM") != "dumb"


def step_line(label: str, stream: TextIO | None = None) -> tqdm[NoReturn] | None:
    """A live ``label: N/M [elapsed]`` line to update with :func:`show_step` (None where
    lines are not live: the caller prints its plain lines instead)."""
    stream = stream if stream is not None else sys.stderr
    if not live(stream):
        return None
    return tqdm(total=0, desc=label, file=stream, leave=False, dynamic_ncols=True,
                bar_format="{desc}: {n}/{total} steps [{elapsed}]")  # fmt: skip


def show_step(line: tqdm[NoReturn], done: int, total: int) -> None:
    line.total = total
    line.n = done
    line.refresh()


@contextlib.contextmanager
def ticking(label: str, stream: TextIO | None = None) -> Iterator[None]:
    """While the block runs (one long program: a smoke driver under qemu or wine), a live
    ``label [elapsed]`` line redrawn every second; nothing where lines are not live."""
    stream = stream if stream is not None else sys.stderr
    if not live(stream):
        yield
        return
    line = tqdm(total=None, desc=label, file=stream, leave=False, bar_format="{desc} [{elapsed}]")
    done = threading.Event()

    def redraw() -> None:
        while not done.wait(TICK_S):
            line.refresh()

    thread = threading.Thread(target=redraw, name="progress-tick", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        line.close()
