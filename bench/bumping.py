"""Section 5: what a bump costs beyond its native builds.

* ``new_tag``: ``bump`` of a tag releases.toml does not know (b11312 plus one added function,
  served by a loopback mirror in GitHub's archive layout, as ``tests/bump/test_unpinned_bump.py``
  does), linux-x86_64 only, each repeat in a fresh cache that shares the ccache (warm): its wall
  time against its own build gate's time, read from the bump's ``gates.json``.
* ``rebump``: ``bump`` of the current pin in a copy of this checkout, caches warm (the build is
  up to date): its wall time against a cold build of the same platform (fresh cache, empty
  ccache, one run).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.stats import Series, log, ratio_series

PLATFORM = "linux-x86_64"
METHOD = (
    "new tag: `bump` of a tag releases.toml does not know (b11312 plus one added function, "
    "served by a loopback mirror in GitHub's archive layout), linux-x86_64 only, each repeat in a "
    "fresh cache sharing the ccache (warm), against its own build gate's time from the bump's "
    "gates.json. Re-bump: `bump` of the current pin in a copy of the checkout, caches warm (the "
    "build is current), against one cold build of the same platform (fresh cache, empty ccache)."
)


def _bump(repo: Path, args: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "generator", "--repo", str(repo), "bump", *args,
         "--platform", PLATFORM],
        check=True, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return time.perf_counter() - start


def _build_seconds(cache: Path) -> float:
    """The build gate's time in the (one) bump work folder under ``cache``."""
    (gates,) = list((cache / "bump").glob("*/gates.json"))
    outcomes = json.loads(gates.read_text(encoding="utf-8"))[PLATFORM]
    return float(next(o["seconds"] for o in outcomes if o["gate"] == "build"))


def _checkout_copy(repo: Path, dest: Path) -> Path:
    dest.mkdir(parents=True)
    for name in ("releases.toml", "CHANGELOG.md"):
        shutil.copy2(repo / name, dest / name)
    for name in ("generated", "reports"):
        shutil.copytree(repo / name, dest / name, symlinks=True)
    return dest


def _new_tag_runs(repo: Path, tree: Path, ccache: Path, repeats: int) -> tuple[Series, Series]:
    sys.path.insert(0, str(repo))
    from generator.sources.providers import UPSTREAM_REPO
    from tests.bump.test_unpinned_bump import COMMIT, TAG, derived_tree
    from tests.sources.archives import pack_like_github
    from tests.sources.http_server import Routes, serve

    wall, build = Series("s"), Series("s")
    with tempfile.TemporaryDirectory(prefix="bench-bump-") as tmp:
        work = Path(tmp)
        upstream = derived_tree(tree, work / "upstream")
        archive = pack_like_github(upstream, work / f"{TAG}.tar.gz", f"llama.cpp-{TAG}", COMMIT)
        routes = Routes({f"/{UPSTREAM_REPO}/archive/refs/tags/{TAG}.tar.gz": archive.read_bytes()})
        with serve(routes) as mirror:
            for i in range(repeats):
                cache = work / f"cache-{i}"
                cache.mkdir()
                (cache / "ccache").symlink_to(ccache)
                checkout = _checkout_copy(repo, work / f"repo-{i}")
                env = {**os.environ, "PYTHONPATH": str(repo), "LLAMA_BINDGEN_CACHE": str(cache)}
                args = [TAG, "--mirror", mirror, "--no-github", "--cache", str(cache)]
                wall.add(_bump(checkout, args, env, work))
                build.add(_build_seconds(cache))
                log(f"bump new tag {i + 1}/{repeats}: {wall.values[-1]:.0f} s, "
                    f"its build {build.values[-1]:.0f} s")  # fmt: skip
                shutil.rmtree(cache)
    return wall, build


def _rebump_runs(repo: Path, cache: Path, pinned: str, repeats: int) -> Series:
    wall = Series("s")
    with tempfile.TemporaryDirectory(prefix="bench-rebump-") as tmp:
        checkout = _checkout_copy(repo, Path(tmp) / "repo")
        env = {**os.environ, "PYTHONPATH": str(repo), "LLAMA_BINDGEN_CACHE": str(cache)}
        _bump(checkout, [pinned, "--no-github"], env, Path(tmp))  # warm: the build is current
        for i in range(repeats):
            wall.add(_bump(checkout, [pinned, "--no-github"], env, Path(tmp)))
            log(f"re-bump {pinned} {i + 1}/{repeats}: {wall.values[-1]:.1f} s")
    return wall


def _cold_build(repo: Path, tree: Path) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as tmp:
        env = {**os.environ, "PYTHONPATH": str(repo), "LLAMA_BINDGEN_CACHE": tmp}
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "generator", "build", "--tree", str(tree), "--platform",
             PLATFORM, "--out", str(Path(tmp) / "out")],
            check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        seconds = time.perf_counter() - start
    log(f"cold build of {PLATFORM}: {seconds:.0f} s")
    return seconds


def run(tree: Path, repo: Path, cache: Path, pinned: str, repeats: int) -> dict[str, Any]:
    new_wall, new_build = _new_tag_runs(repo, tree, cache / "ccache", repeats)
    rebump = _rebump_runs(repo, cache, pinned, repeats)
    cold = _cold_build(repo, tree)
    return {
        "method": METHOD,
        "platform": PLATFORM,
        "new_tag_wall_s": new_wall.summary(),
        "new_tag_build_s": new_build.summary(),
        "new_tag_wall_over_build": ratio_series(new_wall, new_build).summary(),
        "rebump_wall_s": rebump.summary(),
        "cold_build_s": cold,
        "rebump_over_cold_build": Series("x", [w / cold for w in rebump.values]).summary(),
    }
