"""llama.cpp's own example programs, to compare the runtime's output with upstream's drivers.

``llama-simple`` (examples/simple: greedy, the whole prompt in one batch, then one token per
decode) and ``llama-speculative-simple`` (examples/speculative-simple: speculative decoding with
the ``--spec-type`` strategies) are built from the tree itself with upstream's own CMake project,
unpatched: a configure with the common library and the examples on, and only those two targets
built. The options are the host build's (``BASE_CMAKE_OPTIONS``: Release, portable code, shared
libraries) and ccache is the same, so llama.cpp's and ggml's objects come from the cache the host
build filled.

The programs run on the host build's libraries (libllama, ggml), not on the copies this build
links them against: they are built without a run path and started with the library path naming
their own folder (libllama-common) and then the host build's ``lib/``. So both sides of a
comparison run the same machine code, and only the drivers differ.

Layout: CMake's build folder ``<cache>/build/upstream-drivers-<key>-<where>/cmake`` (as deep as
the host build's, and the tree compiled from the host build's stable source folder
``<cache>/stage/<host platform>/llama.cpp`` under its lock, so ccache's relative paths match), the
programs and libllama-common in ``<cache>/upstream-drivers/<key>/bin`` with ``drivers.json``
(commit, options, sha256 of each file); a second call with that record intact runs no CMake.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator.errors import UsageError
from generator.hashing import file_sha256
from generator.native.build_costs import BuildCost, record_cost
from generator.native.build_info import BUILD_INFO_NAME, read_build_info
from generator.native.ccache_stats import STATS_LOG, read_stats_log
from generator.native.cmake_driver import build_environment, ccache_defines, progress, run_step
from generator.native.host import host_toolchain
from generator.native.shared_source import staged_source
from generator.paths import default_cache_dir
from generator.platforms import BASE_CMAKE_OPTIONS, get_platform, host_platform_name
from generator.sources.tree import Tree

DRIVERS: tuple[str, ...] = ("llama-simple", "llama-speculative-simple")
RECORD = "drivers.json"
RECORD_FORMAT = 1
# Upstream's own options on top of the host build's: the common library and the examples.
_OPTIONS: dict[str, str] = {
    "LLAMA_BUILD_COMMON": "ON",
    "LLAMA_BUILD_EXAMPLES": "ON",
    "LLAMA_BUILD_APP": "OFF",
    "LLAMA_BUILD_UI": "OFF",
    "CMAKE_SKIP_BUILD_RPATH": "ON",  # the library path decides which libllama runs
}
_NOT_UPSTREAM = ("LLAMA_MTP",)  # the wrapper project's own option


@dataclass(frozen=True)
class UpstreamDrivers:
    """The built programs (``bin_dir``) and the libraries they run on (``lib_dir``)."""

    bin_dir: Path
    lib_dir: Path
    commit: str

    def program(self, name: str) -> Path:
        if name not in DRIVERS:
            raise UsageError(f"unknown upstream driver {name!r} (built: {', '.join(DRIVERS)})")
        return self.bin_dir / name

    def environment(self) -> dict[str, str]:
        var = "DYLD_LIBRARY_PATH" if sys.platform == "darwin" else "LD_LIBRARY_PATH"
        env = dict(os.environ)
        env[var] = os.pathsep.join([str(self.bin_dir), str(self.lib_dir)])
        return env

    def run(
        self, name: str, args: Sequence[str], timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        """Run driver ``name`` with ``args`` on the host build's libraries (output captured)."""
        argv = [str(self.program(name)), *args]
        return subprocess.run(
            argv, capture_output=True, text=True, errors="replace", env=self.environment(),
            timeout=timeout, check=False,
        )  # fmt: skip


def _options() -> dict[str, str]:
    options = {k: v for k, v in BASE_CMAKE_OPTIONS.items() if k not in _NOT_UPSTREAM}
    options.update(host_toolchain(get_platform(host_platform_name())).cmake_options)
    options.update(_OPTIONS)
    return options


def _folders(tree: Tree) -> tuple[Path, Path]:
    """(CMake's build folder, the installed programs' folder) of ``tree``."""
    where = hashlib.sha256(str(tree.root).encode()).hexdigest()[:8]
    cache = default_cache_dir()
    bdir = cache / "build" / f"upstream-drivers-{tree.cache_key}-{where}"
    return bdir, cache / "upstream-drivers" / tree.cache_key / "bin"


def _check_libraries(tree: Tree, lib_dir: Path) -> None:
    """The host build in ``lib_dir`` must be of the same commit (the same ABI)."""
    info = read_build_info(lib_dir.parent / BUILD_INFO_NAME)
    if info is None:
        raise UsageError(f"{lib_dir}: not the lib/ folder of a llama-bindgen build")
    if info.get("commit") != tree.commit_label:
        raise UsageError(
            f"{lib_dir} is a build of {info.get('commit')}, not of {tree.commit_label}: the "
            "drivers must run on a build of their own tree"
        )


def _record_current(bin_dir: Path, tree: Tree, options: dict[str, str]) -> bool:
    try:
        record: dict[str, Any] = json.loads((bin_dir / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if (record.get("format"), record.get("commit"), record.get("options")) != (
        RECORD_FORMAT, tree.commit_label, options,
    ):  # fmt: skip
        return False
    files: dict[str, str] = record.get("files", {})
    return set(DRIVERS) <= set(files) and all(
        (bin_dir / name).is_file() and file_sha256(bin_dir / name) == sha
        for name, sha in files.items()
    )


def _compile(tree: Tree, bdir: Path, options: dict[str, str], jobs: int) -> None:
    toolchain = host_toolchain(get_platform(host_platform_name()))
    cmake_dir, logs = bdir / "cmake", bdir / "logs"
    defines = [f"-D{k}={v}" for k, v in sorted(options.items())]
    defines += [
        f"-DCMAKE_C_COMPILER={toolchain.c_compiler}",
        f"-DCMAKE_CXX_COMPILER={toolchain.cxx_compiler}",
    ]
    defines += ccache_defines()
    cache, label = default_cache_dir(), f"upstream drivers {tree.name}"
    # compiled from the host build's stable source folder, so ccache's paths are its paths
    with staged_source(tree.root, cache, host_platform_name(), label) as source:
        (logs / STATS_LOG).unlink(missing_ok=True)  # this build's counts only (build_costs)
        env = build_environment(cache, [source, bdir], logs / STATS_LOG)
        # upstream's project takes no tree name (shared_source.tree_id): ccache's preprocessor
        # mode only, which shares objects by their preprocessed text and misses no new header
        env["CCACHE_NODIRECT"] = "1"
        configure = ["cmake", "-S", str(source), "-B", str(cmake_dir), "-G", "Ninja", *defines]
        run_step(f"{label}: configure", configure, logs / "configure.log", env)
        build = ["ninja", "-C", str(cmake_dir), f"-j{jobs}", *DRIVERS]
        run_step(f"{label}: compile {' '.join(DRIVERS)}", build, logs / "build.log", env)


def _install(bdir: Path, bin_dir: Path, tree: Tree, options: dict[str, str]) -> None:
    """Copy the programs and libllama-common (links kept) into ``bin_dir``; write the record."""
    built = bdir / "cmake" / "bin"
    if bin_dir.exists():
        shutil.rmtree(bin_dir)
    bin_dir.mkdir(parents=True)
    names = [*DRIVERS, *(p.name for p in sorted(built.glob("*llama-common*")))]
    for name in names:
        shutil.copy2(built / name, bin_dir / name, follow_symlinks=False)
    files = {n: file_sha256(bin_dir / n) for n in names if not (bin_dir / n).is_symlink()}
    record = {"format": RECORD_FORMAT, "commit": tree.commit_label, "options": options,
              "files": files}  # fmt: skip
    text = json.dumps(record, indent=2, sort_keys=True) + "\n"
    (bin_dir / RECORD).write_text(text, encoding="utf-8")


def build_upstream_drivers(
    tree: Tree | Path, lib_dir: Path, jobs: int = 2, force: bool = False
) -> UpstreamDrivers:
    """Build (or reuse) upstream's ``llama-simple`` and ``llama-speculative-simple`` of ``tree``
    (a Tree, or a fetched tree's folder), to run on the host build whose libraries are in
    ``lib_dir`` (a build of the same tree)."""
    if sys.platform == "win32":
        raise UsageError("the upstream drivers are built on Linux and macOS hosts only")
    tree = tree if isinstance(tree, Tree) else Tree.read(tree)
    _check_libraries(tree, lib_dir)
    options = _options()
    bdir, bin_dir = _folders(tree)
    drivers = UpstreamDrivers(bin_dir, lib_dir.resolve(), tree.commit_label)
    label = f"upstream drivers {tree.name}"
    if not force and _record_current(bin_dir, tree, options):
        progress(f"{label}: up to date in {bin_dir}")
        return drivers
    started = time.monotonic()
    progress(f"{label}: llama.cpp {tree.name} ({tree.commit12}) in {bdir}")
    _compile(tree, bdir, options, jobs)
    _install(bdir, bin_dir, tree, options)
    seconds, counts = time.monotonic() - started, read_stats_log(bdir / "logs" / STATS_LOG)
    record_cost(BuildCost(label, tree.name, seconds, counts))
    progress(f"{label}: done in {seconds:.0f} s: {bin_dir}")
    return drivers
