"""Run CMake configure, Ninja build and install steps with a log per step and progress on stderr."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from generator.errors import BindgenError
from generator.progress import show_step, step_line

_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\]")


class BuildError(BindgenError):
    """A native build step failed; the message names the step and its kept log."""

    exit_code = 3

    def __init__(self, step: str, log: Path, detail: str) -> None:
        super().__init__(f"{step} failed ({detail}); log kept at {log}")
        self.step = step
        self.log = log


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _tail(log: Path, lines: int = 15) -> str:
    try:
        text = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def run_step(
    label: str,
    argv: Sequence[str],
    log: Path,
    env: Mapping[str, str],
    cwd: Path | None = None,
) -> None:
    """Run ``argv`` writing all its output to ``log``; report Ninja's [N/M] steps as progress.

    Progress lines go out at most every 5% of the steps (and the last one), so a 2-core build
    prints about twenty lines; on a terminal (outside CI) one live line shows every step and
    the elapsed time instead (``generator.progress``). A nested build's own [N/M] (ggml-vulkan
    builds its shader generator as a sub-project) is not the build's progress: only the largest
    M counts.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    progress(f"{label} (log: {log})")
    last_pct = -5
    largest_total = 0
    live_line = step_line(label)  # on a terminal: one live line instead of the step lines
    with log.open("w", encoding="utf-8") as fh, contextlib.ExitStack() as stack:
        if live_line is not None:
            stack.callback(live_line.close)
        fh.write("$ " + " ".join(argv) + "\n")
        fh.flush()
        try:
            proc = subprocess.Popen(
                list(argv),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=dict(env),
                cwd=cwd,
                text=True,
                errors="replace",
            )
        except OSError as exc:
            raise BuildError(label, log, f"cannot start {argv[0]}: {exc}") from exc
        assert proc.stdout is not None
        for line in proc.stdout:
            fh.write(line)
            m = _NINJA_STEP.match(line)
            if m:
                done, total = int(m.group(1)), int(m.group(2))
                if total < largest_total:
                    continue
                if total > largest_total:
                    largest_total, last_pct = total, -5
                pct = 100 * done // max(total, 1)
                if live_line is not None:
                    show_step(live_line, done, total)
                elif pct >= last_pct + 5 or done == total:
                    last_pct = pct
                    progress(f"{label}: step {done}/{total}")
        rc = proc.wait()
    if rc != 0:
        tail = _tail(log)
        if tail:
            progress(f"{label}: last lines of {log}:\n{tail}")
        raise BuildError(label, log, f"exit status {rc}")


def build_environment(
    cache_dir: Path, base_dirs: Sequence[Path], stats_log: Path | None = None
) -> dict[str, str]:
    """The environment for a build: ccache under the cache, with the paths under the common
    parent of ``base_dirs`` made relative (and the working folder not hashed), so a build whose
    sources sit at the same relative place finds another's results; ``stats_log``: where ccache
    appends this build's own counters (``ccache_stats.read_stats_log``)."""
    env = dict(os.environ)
    env["CCACHE_DIR"] = str(cache_dir / "ccache")
    if base_dirs:
        env["CCACHE_BASEDIR"] = str(os.path.commonpath([str(p) for p in base_dirs]))
    env.setdefault("CCACHE_NOHASHDIR", "1")
    if stats_log is not None:
        stats_log.parent.mkdir(parents=True, exist_ok=True)
        env["CCACHE_STATSLOG"] = str(stats_log)
    # Ninja uses this for its status line; keep it parseable.
    env["NINJA_STATUS"] = "[%f/%t] "
    return env


def ccache_path() -> str | None:
    return shutil.which("ccache")


def ccache_defines() -> list[str]:
    """CMake's compiler launchers set to ccache, where it is installed (else none)."""
    launcher = ccache_path()
    if not launcher:
        return []
    return [
        f"-DCMAKE_C_COMPILER_LAUNCHER={launcher}",
        f"-DCMAKE_CXX_COMPILER_LAUNCHER={launcher}",
    ]
