"""The tags section's parsing of a build's last line and its report, offline."""

from __future__ import annotations

from bench import tag_builds
from generator.native.build import _ccache_summary
from generator.native.ccache_stats import CacheCounts


def test_the_counts_are_read_from_the_builds_last_line() -> None:
    line = f"build linux-x86_64: done: /x/linux-x86_64{_ccache_summary(CacheCounts(231, 12))}"
    assert tag_builds._COUNTS.findall(line) == [("231", "12")]
    assert _ccache_summary(None) == ""


def test_the_report_has_one_row_per_pair_with_its_ratio() -> None:
    def record(seconds: float, hits: int, misses: int) -> dict[str, float | int]:
        return {"seconds": seconds, "hits": hits, "misses": misses}

    section = {
        "method": "m",
        "pairs": [
            {"previous": "b1", "tag": "b2", "warm": record(60, 230, 10),
             "cold": record(360, 0, 240), "warm_over_cold": 60 / 360},
        ],
    }  # fmt: skip
    rows = [line for line in tag_builds.lines(section) if line.startswith("| b")]
    assert rows == [
        "| b2 (after b1) | 60 s (-) | 230 / 10 | 360 s (-) | 0 / 240 | 0.17x (-) | None, None |"
    ]
