"""The cost of each native build (``generator.native.build_costs``): recorded only where asked,
read back as written, and tabled the longest first with the total."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.native.build_costs import (
    COSTS_ENV,
    RUNNING_TEST_ENV,
    BuildCost,
    cost_table,
    read_costs,
    record_cost,
)
from generator.native.ccache_stats import CacheCounts


def test_nothing_is_recorded_unless_a_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(COSTS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    record_cost(BuildCost("build linux-x86_64", "b1", 1.0, None))
    assert list(tmp_path.iterdir()) == []


def test_costs_are_read_back_and_tabled_longest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "deep" / "costs.jsonl"
    monkeypatch.setenv(COSTS_ENV, str(path))
    monkeypatch.setenv(RUNNING_TEST_ENV, "tests/x.py::test_y (setup)")
    short = BuildCost("build linux-aarch64", "b2", 12.25, CacheCounts(90, 10))
    long = BuildCost("upstream drivers b2", "b2", 300.0, None)
    record_cost(short)
    record_cost(long)
    with path.open("a") as fh:
        fh.write("not json\n")
    during = "tests/x.py::test_y (setup)"  # the running test, as pytest names it
    assert read_costs(path) == [
        BuildCost("build linux-aarch64", "b2", 12.2, CacheCounts(90, 10), during),
        BuildCost("upstream drivers b2", "b2", 300.0, None, during),
    ]
    lines = cost_table(read_costs(path))
    assert lines[0].startswith("upstream drivers b2 (b2)") and "300.0 s" in lines[0]
    assert "no ccache counts" in lines[0] and lines[0].endswith(f"  in {during}")
    assert "90 hits, 10 misses, hit rate 90%" in lines[1]
    assert lines[2] == "2 builds, 312 s in all; ccache 90 hits, 10 misses"


def test_a_run_without_builds_says_so(tmp_path: Path) -> None:
    assert read_costs(tmp_path / "none.jsonl") == []
    assert cost_table([]) == ["no native build ran CMake in this run"]
