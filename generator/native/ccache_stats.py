"""ccache's hit and miss counts: of one build (its stats log) and of the whole cache folder.

A build sets ``CCACHE_STATSLOG`` to a file of its own (``<build folder>/logs/ccache-stats.log``):
ccache appends, per compilation, a ``# <source>`` line and the counters it raised, so a build's
own counts are read there without zeroing the shared counters other builds may be adding to.
The cache folder's totals come from ``ccache --print-stats`` (one ``name<TAB>value`` a line).
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from generator.native.cmake_driver import ccache_path

# a build's stats log, in its build folder's logs/
STATS_LOG = "ccache-stats.log"
HIT_COUNTERS = ("direct_cache_hit", "preprocessed_cache_hit")
MISS_COUNTER = "cache_miss"
SIZE_COUNTER = "cache_size_kibibyte"


@dataclass(frozen=True)
class CacheCounts:
    hits: int
    misses: int
    size_kib: int | None = None  # the cache folder's size; None for one build's counts

    @staticmethod
    def from_counters(counters: dict[str, int]) -> CacheCounts:
        size = counters.get(SIZE_COUNTER)
        return CacheCounts(
            sum(counters.get(name, 0) for name in HIT_COUNTERS), counters.get(MISS_COUNTER, 0), size
        )

    @property
    def hit_rate(self) -> float | None:
        total = self.hits + self.misses
        return self.hits / total if total else None

    def describe(self) -> str:
        rate = self.hit_rate
        share = "no cacheable compilations" if rate is None else f"hit rate {100 * rate:.0f}%"
        return f"{self.hits} hits, {self.misses} misses, {share}"

    def to_json(self) -> dict[str, int | float | None]:
        return {"hits": self.hits, "misses": self.misses, "hit_rate": self.hit_rate,
                "size_kib": self.size_kib}  # fmt: skip


def read_stats_log(path: Path) -> CacheCounts | None:
    """One build's counts from its stats log; None when there is none (no ccache, no compiles)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    counters = Counter(line.strip() for line in lines if line.strip() and not line.startswith("#"))
    return CacheCounts.from_counters(dict(counters))


def parse_print_stats(text: str) -> dict[str, int]:
    """``ccache --print-stats``'s counters."""
    counters: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition("\t")
        if value.strip().isdigit():
            counters[name.strip()] = int(value)
    return counters


def cache_counts(ccache_dir: Path) -> CacheCounts:
    """The totals of the cache folder ``ccache_dir`` (OSError/CalledProcessError from ccache)."""
    launcher = ccache_path()
    if launcher is None:
        raise FileNotFoundError("ccache is not installed (not on PATH)")
    env = dict(os.environ, CCACHE_DIR=str(ccache_dir))
    proc = subprocess.run(
        [launcher, "--print-stats"], env=env, capture_output=True, text=True, check=True
    )
    return CacheCounts.from_counters(parse_print_stats(proc.stdout))
