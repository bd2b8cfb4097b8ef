"""Section 6: import and load, whole process.

``import llama_bindings; load(); one call`` against llama-cpp-python 0.3.36's ``import llama_cpp;
one call`` on the same libraries: each case is a fresh ``python -c`` process timed from spawn to
exit, the cases interleaved (their order rotated each repeat). Ours in ABI mode (the declarations
pre-parsed by cffi's out-of-line module ``_ffi_abi.py``), in API mode (the compiled module
``llama-bindgen build`` puts beside the libraries) and, for comparison, with the pre-parsed module
blocked, so that ``_ffi.py`` falls back to parsing ``cdef.h`` in-line (what every import did
before). ``load()`` runs its checks (build record sha256s, ABI identity, exported symbols) as a
user's does: the sha256s at the first load of a file version (the warm-up), sealed by the files'
identities (``verified_files``) for later loads; ``ours_abi_hashing`` turns the seals off, so
that every load hashes. Bytecode is written to a fresh cache folder and one warm-up run per case
fills it, so that every timed process imports from bytecode, as an installed package does.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.calls import LLAMA_CPP_PYTHON_SDIST, extract_llama_cpp_package
from bench.stats import Series, log, ratio_series

CALL = "llama_max_devices"
PEER = "llama_cpp_python"
START = "python_start"
SEALS_ENV = "LLAMA_BINDGEN_VERIFIED_CACHE"  # verified_files' seal file; "off" hashes every load
# What each process runs; its last stdout line is a dict literal (``repr``: importing json in the
# measured process would add the harness's own cost to both sides).
_OURS = """
import sys, time
t0 = time.perf_counter()
{before}import llama_bindings
t1 = time.perf_counter()
libs = llama_bindings.load(sys.argv[1], mode=sys.argv[2])
t2 = time.perf_counter()
n = int(libs.llama.{call}())
t3 = time.perf_counter()
print(repr({"import_s": t1 - t0, "load_s": t2 - t1, "call_s": t3 - t2, "result": n,
                  "mode": libs.mode, "ffi": llama_bindings._ffi.FFI_SOURCE.split(":")[0],
                  "hashed": "hashlib" in sys.modules}))
"""
_BLOCK = (
    'import warnings; warnings.simplefilter("ignore", RuntimeWarning)\n'
    'sys.modules["llama_bindings._ffi_abi"] = None  # the in-line fallback\n'
)
_PEER = """
import time
t0 = time.perf_counter()
import llama_cpp
t1 = time.perf_counter()
n = int(llama_cpp.{call}())
t2 = time.perf_counter()
print(repr({"import_s": t1 - t0, "call_s": t2 - t1, "result": n}))
"""
_START = """print("{'result': None}")"""
METHOD = (
    f"whole process, spawn to exit: `python -c` running `import llama_bindings; "
    f"load(lib_dir, mode=...); llama.{CALL}()` (ours, load() with its checks: build record "
    f"sha256s, ABI identity, exported symbols; the sha256s are taken at the first load of each "
    f"file version and sealed by the files' identities, so later loads, as here after the "
    f"warm-up, stat the files instead; ours_abi_hashing: the seals off, every load hashes) "
    f"or `import llama_cpp; llama_cpp.{CALL}()` "
    f"(llama-cpp-python 0.3.36: its llama_cpp/ package extracted from the sdist, nothing "
    f"compiled, LLAMA_CPP_LIB_PATH at the same lib folder). ours_abi: cffi ABI mode with the "
    f"declarations pre-parsed (_ffi_abi.py); ours_api: the compiled API-mode module; "
    f"ours_inline_cdef: the pre-parsed module blocked, so cdef.h is parsed at import (the "
    f"fallback, and what every import did before). python_start: `python -c` printing one "
    f"line, the interpreter's own start. Bytecode cached (a fresh PYTHONPYCACHEPREFIX, one "
    f"warm-up run per case); cases interleaved, their order rotated each repeat; ratios per "
    f"repeat. Net: minus python_start of the same repeat."
)


def _cases(
    bindings: Path, lib_dir: Path, api_mode: bool, seals: Path
) -> dict[str, tuple[list[str], dict[str, str]]]:
    """case -> (argv after ``python -c``, environment variables it adds)."""
    ours = _OURS.replace("{call}", CALL)
    generated = {"PYTHONPATH": str(bindings), SEALS_ENV: str(seals)}
    cases = {
        START: ([_START], {}),
        "ours_abi": ([ours.replace("{before}", ""), str(lib_dir), "abi"], generated),
        "ours_abi_hashing": (
            [ours.replace("{before}", ""), str(lib_dir), "abi"],
            {**generated, SEALS_ENV: "off"},
        ),
        "ours_inline_cdef": ([ours.replace("{before}", _BLOCK), str(lib_dir), "abi"], generated),
    }
    if api_mode:
        cases["ours_api"] = ([ours.replace("{before}", ""), str(lib_dir), "api"], generated)
    return cases


def _run_case(argv: list[str], env: dict[str, str]) -> tuple[float, dict[str, Any] | str]:
    """Wall seconds and the process's last line (a dict), or its error text."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", *argv], env=env, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        return wall, (proc.stderr or proc.stdout).strip()[-1500:] or f"exit {proc.returncode}"
    out: dict[str, Any] = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    return wall, out


def _peer(cache: Path, work: Path, lib_dir: Path) -> tuple[list[str], dict[str, str]] | str:
    """llama-cpp-python's case and its environment, or why it is unavailable."""
    try:
        package = extract_llama_cpp_package(cache, work)
    except FileNotFoundError as exc:
        return (
            f"{exc}; or fetch it with `python -m pip download llama-cpp-python==0.3.36 "
            f"--no-deps --no-binary :all: -d {cache / 'peers'}` ({LLAMA_CPP_PYTHON_SDIST})"
        )
    env = {"PYTHONPATH": str(package.parent), "LLAMA_CPP_LIB_PATH": str(lib_dir)}
    return [_PEER.replace("{call}", CALL)], env


def _environment(work: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    env.update(extra)
    return env


def run(bindings: Path, lib_dir: Path, cache: Path, repeats: int, api_mode: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        work = Path(tmp)
        cases = _cases(bindings, lib_dir, api_mode, work / "verified-libraries.txt")
        runs = {case: (argv, _environment(work, extra)) for case, (argv, extra) in cases.items()}
        peer = _peer(cache, work, lib_dir)
        unavailable = peer if isinstance(peer, str) else None
        if not isinstance(peer, str):
            runs[PEER] = (peer[0], _environment(work, peer[1]))
        for case, (argv, env) in list(runs.items()):  # warm-up: bytecode, page cache
            _, out = _run_case(argv, env)
            if isinstance(out, str):
                if case != PEER:
                    raise RuntimeError(f"import bench case {case} failed:\n{out}")
                unavailable = f"llama-cpp-python does not import here: {out.splitlines()[-1]}"
                del runs[PEER]
        if unavailable:
            log(f"import: llama-cpp-python unavailable, measuring ours only ({unavailable})")
        return _measure(runs, repeats, unavailable)


def _measure(
    runs: dict[str, tuple[list[str], dict[str, str]]], repeats: int, unavailable: str | None
) -> dict[str, Any]:
    names = list(runs)
    wall = {case: Series("s") for case in names}
    inside: dict[str, dict[str, Series]] = {case: {} for case in names}
    seen: dict[str, dict[str, Any]] = {}
    for i in range(repeats):
        for case in names[i % len(names) :] + names[: i % len(names)]:
            seconds, out = _run_case(*runs[case])
            if isinstance(out, str):
                raise RuntimeError(f"import bench case {case} failed:\n{out}")
            wall[case].add(seconds)
            for key, value in out.items():
                if key.endswith("_s"):
                    inside[case].setdefault(key, Series("s")).add(value)
            seen[case] = {k: v for k, v in out.items() if not k.endswith("_s")}
        log(
            f"import {i + 1}/{repeats}: "
            + ", ".join(f"{c} {wall[c].values[-1]:.3f} s" for c in names)
        )
    return _summarise(wall, inside, seen, unavailable)


def _summarise(
    wall: dict[str, Series],
    inside: dict[str, dict[str, Series]],
    seen: dict[str, dict[str, Any]],
    unavailable: str | None,
) -> dict[str, Any]:
    ratios: dict[str, Any] = {}
    net: dict[str, Any] = {}
    if PEER in wall:
        peer_net = Series(
            "s", [p - s for p, s in zip(wall[PEER].values, wall[START].values, strict=True)]
        )
        for case in wall:
            if case in (PEER, START):
                continue
            ratios[case] = ratio_series(wall[case], wall[PEER]).summary()
            own = Series(
                "s", [c - s for c, s in zip(wall[case].values, wall[START].values, strict=True)]
            )
            net[case] = ratio_series(own, peer_net).summary()
    return {
        "method": METHOD,
        "call": CALL,
        "peer": "llama-cpp-python 0.3.36" if unavailable is None else None,
        "peer_unavailable": unavailable,
        "wall_s": {case: s.summary() for case, s in wall.items()},
        "in_process_s": {
            c: {k: s.summary() for k, s in parts.items()} for c, parts in inside.items()
        },
        "what_ran": seen,
        "ratio_vs_llama_cpp_python": ratios,
        "net_ratio_vs_llama_cpp_python": net,
    }
