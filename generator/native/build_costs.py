"""What each native build cost, for whoever runs many of them (the test suite, CI).

When ``LLAMA_BINDGEN_BUILD_COSTS`` names a file, every native build that ran CMake (``build``'s,
upstream's drivers') appends one JSON line to it: what was built, from which tree, the seconds
its configure, compile and install took, and its own ccache hits and misses (its stats log,
:mod:`generator.native.ccache_stats`). A build that was reused (nothing to compile) writes none.
Builds made in child processes (a test running the CLI) inherit the variable and write to the
same file; each line is one ``write`` in append mode, so lines of processes running side by
side do not mix. ``tests/conftest.py`` sets it for a pytest run and prints the table at the end;
inside pytest each line also names the test that was running (pytest's ``PYTEST_CURRENT_TEST``,
which child processes inherit), so a build is traced to the test that paid for it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

from generator.native.ccache_stats import CacheCounts

COSTS_ENV = "LLAMA_BINDGEN_BUILD_COSTS"
RUNNING_TEST_ENV = "PYTEST_CURRENT_TEST"  # "tests/x.py::test_y (setup)", set by pytest


@dataclass(frozen=True)
class BuildCost:
    label: str  # "build linux-x86_64", "upstream drivers b11549"
    tree: str  # the tree's name (tag or commit label)
    seconds: float
    counts: CacheCounts | None  # None: no ccache (or nothing it could cache)
    during: str = ""  # the test that was running ("" outside pytest)

    def to_json(self) -> dict[str, object]:
        hits = None if self.counts is None else self.counts.hits
        misses = None if self.counts is None else self.counts.misses
        return {"label": self.label, "tree": self.tree, "seconds": round(self.seconds, 1),
                "hits": hits, "misses": misses, "during": self.during}  # fmt: skip

    @staticmethod
    def from_json(data: dict[str, object]) -> BuildCost:
        hits, misses = data.get("hits"), data.get("misses")
        counts = (
            CacheCounts(hits, misses) if isinstance(hits, int) and isinstance(misses, int) else None
        )
        seconds = data.get("seconds")
        return BuildCost(
            str(data.get("label")),
            str(data.get("tree")),
            float(seconds) if isinstance(seconds, int | float) else 0.0,
            counts,
            str(data.get("during") or ""),
        )


def record_cost(cost: BuildCost) -> None:
    """Append ``cost`` to the file ``LLAMA_BINDGEN_BUILD_COSTS`` names (nothing when unset)."""
    target = os.environ.get(COSTS_ENV)
    if not target:
        return
    if not cost.during:
        cost = replace(cost, during=os.environ.get(RUNNING_TEST_ENV, ""))
    line = json.dumps(cost.to_json(), sort_keys=True) + "\n"
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(line)


def read_costs(path: Path) -> list[BuildCost]:
    """The costs recorded in ``path`` (none when it does not exist); unreadable lines skipped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    costs: list[BuildCost] = []
    for line in lines:
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            costs.append(BuildCost.from_json(data))
    return costs


def cost_table(costs: list[BuildCost]) -> list[str]:
    """Lines of a table of ``costs``, the longest first, and their total."""
    if not costs:
        return ["no native build ran CMake in this run"]
    rows = sorted(costs, key=lambda c: -c.seconds)
    width = max(len(f"{c.label} ({c.tree})") for c in rows)
    lines = []
    for cost in rows:
        cache = "no ccache counts" if cost.counts is None else cost.counts.describe()
        during = f"  in {cost.during}" if cost.during else ""
        label = f"{cost.label} ({cost.tree})".ljust(width)
        lines.append(f"{label}  {cost.seconds:7.1f} s  {cache}{during}")
    total = sum(c.seconds for c in rows)
    hits = sum(c.counts.hits for c in rows if c.counts is not None)
    misses = sum(c.counts.misses for c in rows if c.counts is not None)
    lines.append(f"{len(rows)} builds, {total:.0f} s in all; ccache {hits} hits, {misses} misses")
    return lines
