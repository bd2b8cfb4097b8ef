"""Repeated, interleaved measurements and whole-process time and peak memory."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Series:
    """Repeated measurements of one quantity."""

    unit: str
    values: list[float] = field(default_factory=list)

    def add(self, value: float) -> None:
        self.values.append(value)

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    def summary(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "median": self.median,
            "min": min(self.values) if self.values else None,
            "max": max(self.values) if self.values else None,
            "runs": len(self.values),
            "values": self.values,
        }


def ratio_series(num: Series, den: Series, unit: str = "x") -> Series:
    """Per-repetition ratios of two interleaved series (run i of one over run i of the other)."""
    return Series(unit, [a / b for a, b in zip(num.values, den.values, strict=False) if b])


@dataclass(frozen=True)
class ProcessRun:
    wall_s: float
    peak_rss_mb: float
    returncode: int
    stdout: str
    stderr: str


# A small launcher forks and execs the command and reports its child's peak RSS. Measuring the
# command as our own child would not do: Linux carries a process's peak RSS over fork and exec, so
# the figure could never be below this (larger) Python process's RSS. The launcher's floor is its
# own size at fork time, about 13 MB.
_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    fh.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)
"""


def run_measured(
    cmd: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None
) -> ProcessRun:
    """Run ``cmd``: wall time, and the peak resident memory of that process alone (wait4 in a
    small launcher, see ``_LAUNCHER``)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    with (
        tempfile.TemporaryFile("w+") as out,
        tempfile.TemporaryFile("w+") as err,
        tempfile.TemporaryDirectory() as scratch,
    ):
        peak_file = Path(scratch) / "maxrss"
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, str(peak_file), *cmd],
            stdout=out, stderr=err, env=full_env, cwd=cwd, check=False,
        )  # fmt: skip
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        # ru_maxrss is in KiB on Linux
        peak_kib = int(peak_file.read_text()) if peak_file.is_file() else 0
        return ProcessRun(wall, peak_kib / 1024.0, proc.returncode, out.read(), err.read())


def check(run: ProcessRun, what: str) -> ProcessRun:
    if run.returncode != 0:
        tail = (run.stderr or run.stdout)[-2000:]
        raise RuntimeError(f"{what} failed with exit code {run.returncode}:\n{tail}")
    return run


def log(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)
