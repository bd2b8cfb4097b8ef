"""The GPU check's one report, ``gpu-check.json``: what ran where, each gate, the smoke's
metrics, each stage's seconds.

Its ``status`` is ``passed`` only when every gate passed; ``failed`` when one failed; ``not-run``
otherwise (no GPU, no driver, no nvcc here; or the run stopped before it finished: the report is
written after every stage, so a run cut off leaves one that says where). A dry run (``--backend
cpu``, the tests' run of the kit here) says so in ``dry_run`` and ``what``: it checks the kit and
the run step, never a GPU.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPORT_NAME = "gpu-check.json"
REPORT_FORMAT = 1
PASSED, FAILED, NOT_RUN = "passed", "failed", "not-run"
EXIT_CODES = {PASSED: 0, FAILED: 1, NOT_RUN: 3}  # as the CLI's gates and smoke exit
GPU_CHECK = "CUDA gates and smoke on this machine's NVIDIA GPU"
DRY_RUN = "dry run: the CPU backend instead of CUDA (checks the kit and the run step, not a GPU)"


def overall_status(gates: dict[str, str]) -> str:
    """``passed`` when every gate passed, ``failed`` when one failed, else ``not-run``."""
    statuses = set(gates.values())
    if FAILED in statuses:
        return FAILED
    return PASSED if gates and statuses == {PASSED} else NOT_RUN


@dataclass
class Report:
    """The report as it grows: ``write`` after each stage."""

    backend: str
    out: Path
    status: str = NOT_RUN
    reason: str = "did not finish: stopped while starting"
    machine: dict[str, Any] = field(default_factory=dict)
    gpu: dict[str, Any] = field(default_factory=dict)
    tree: dict[str, Any] = field(default_factory=dict)
    gates: dict[str, dict[str, Any]] = field(default_factory=dict)
    smoke: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    @property
    def dry_run(self) -> bool:
        return self.backend != "cuda"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def stage(self, name: str) -> None:
        """Record that ``name`` began (the report says so if the run stops in it)."""
        self.reason = f"did not finish: stopped during {name}"
        self.write()

    def timed(self, name: str, since: float) -> None:
        self.timings[name] = round(time.monotonic() - since, 3)

    def finish(self, status: str, reason: str = "") -> Path:
        self.status, self.reason = status, reason
        self.timings["total"] = round(time.monotonic() - self.started, 3)
        return self.write()

    def to_json(self) -> dict[str, Any]:
        return {
            "format": REPORT_FORMAT,
            "what": DRY_RUN if self.dry_run else GPU_CHECK,
            "dry_run": self.dry_run,
            "backend": self.backend,
            "status": self.status,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "machine": self.machine,
            "gpu": self.gpu,
            "tree": self.tree,
            "gates": self.gates,
            "smoke": self.smoke,
            "timings_s": self.timings,
        }

    def write(self) -> Path:
        self.out.mkdir(parents=True, exist_ok=True)
        path = self.out / REPORT_NAME
        text = json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"
        scratch = path.with_suffix(".json.partial")
        scratch.write_text(text, encoding="utf-8")
        scratch.replace(path)
        return path
