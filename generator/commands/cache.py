"""``llama-bindgen cache``: the compiler cache's size, hits, misses and hit rate."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

from generator.errors import UsageError
from generator.paths import default_cache_dir


def run(args: argparse.Namespace) -> int:
    from generator.native.ccache_stats import CacheCounts, cache_counts

    cache: Path = args.cache or default_cache_dir()
    if cache.exists() and not cache.is_dir():
        raise UsageError(f"--cache {cache}: not a folder")
    ccache_dir = cache / "ccache"
    if not ccache_dir.is_dir():  # nothing built yet: nothing to ask ccache (it would make one)
        counts = None
    else:
        try:
            counts = cache_counts(ccache_dir)
        except (OSError, subprocess.CalledProcessError) as exc:
            raise UsageError(f"ccache --print-stats on {ccache_dir} failed: {exc}") from None
    if args.json:
        empty = CacheCounts(0, 0, 0)
        record = {"ccache_dir": str(ccache_dir), **(counts or empty).to_json()}
        print(json.dumps(record, indent=2, sort_keys=True))
    elif counts is None:
        print(f"{ccache_dir}: no compiler cache yet (no build has run with this cache)")
    else:
        size = f"{(counts.size_kib or 0) / 1024:.1f} MiB"
        print(f"{ccache_dir}: {size}, {counts.describe()}")
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "cache",
        help="the compiler cache's size, hits, misses and hit rate",
        description=(
            "Print the size of the compiler cache every native build shares (<cache>/ccache) "
            "and ccache's hits, misses and hit rate over every build since the cache was made "
            "or its counters zeroed (ccache --zero-stats with CCACHE_DIR set to that folder). "
            "Each build's own counts are in its last line and its logs/ccache-stats.log."
        ),
    )
    parser.add_argument(
        "--cache",
        type=Path,
        help="cache directory (default: $LLAMA_BINDGEN_CACHE or the user cache folder)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print {ccache_dir, size_kib, hits, misses, hit_rate}"
    )
    parser.set_defaults(func=run)
