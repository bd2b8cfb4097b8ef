"""Section 2: foreign-call overhead, ours (compiled API mode as shipped; ABI mode, the
fallback) vs ctypes."""

from __future__ import annotations

import json
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from bench.stats import Series, check, log, ratio_series, run_measured

LLAMA_CPP_PYTHON_SDIST = "llama_cpp_python-0.3.36.tar.gz"  # vendors exactly b11312


def extract_llama_cpp_package(cache: Path, work: Path) -> Path:
    """Extract only the ``llama_cpp/`` Python package of the cached sdist (nothing compiled):
    ``<cache>/sdists`` (where `fetch` caches it) or ``<cache>/peers`` (a `pip download`)."""
    found_sdists = [
        cache / folder / LLAMA_CPP_PYTHON_SDIST
        for folder in ("sdists", "peers")
        if (cache / folder / LLAMA_CPP_PYTHON_SDIST).is_file()
    ]
    if not found_sdists:
        raise FileNotFoundError(
            f"{cache / 'sdists' / LLAMA_CPP_PYTHON_SDIST} is missing: `llama-bindgen fetch "
            "b11312` caches it when it uses the sdist"
        )
    sdist = found_sdists[0]
    with tarfile.open(sdist) as tar:
        members = [
            m
            for m in tar.getmembers()
            if m.isfile() and m.name.split("/")[1:2] == ["llama_cpp"] and ".." not in m.name
        ]
        tar.extractall(work, members=members, filter="data")
    found = next(work.glob("*/llama_cpp"))
    return found


def run(
    repo: Path,
    bindings: Path,
    lib_dir: Path,
    cache: Path,
    model: Path,
    repeats: int,
    api_mode: bool,
    calls: int = 200_000,
    fills: int = 200,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-calls-") as tmp:
        work = Path(tmp)
        package = extract_llama_cpp_package(cache, work)
        config = {
            "repo": str(repo),
            "bindings": str(bindings),
            "lib_dir": str(lib_dir),
            "model": str(model),
            "llama_cpp_package": str(package),
            "api_mode": api_mode,
            "repeats": repeats,
            "calls": calls,
            "fills": fills,
        }
        (work / "config.json").write_text(json.dumps(config))
        log(f"foreign calls: {repeats} interleaved repeats in one process")
        r = check(
            run_measured(
                [sys.executable, "-m", "bench.calls_worker", str(work / "config.json")],
                {"PYTHONPATH": str(repo.resolve())},
            ),
            "calls worker",
        )
    raw = json.loads(r.stdout.strip().splitlines()[-1])
    empty = raw["empty_loop_ns"]
    series: dict[str, dict[str, Series]] = {}
    for impl, cases in raw["ns_per_iteration"].items():
        series[impl] = {}
        for case, values in cases.items():
            unit = "ns per 512-token fill" if case.startswith("batch") else "ns per call"
            # the empty Python loop's cost is subtracted from single calls, same repeat
            batch = case.startswith("batch")
            net = values if batch else [v - e for v, e in zip(values, empty, strict=True)]
            series[impl][case] = Series(unit, net)
    ratios: dict[str, dict[str, Any]] = {}
    for impl in series:
        if impl == "ctypes":
            continue
        ratios[impl] = {
            case: ratio_series(s, series["ctypes"][case.replace("_slices", "")]).summary()
            for case, s in series[impl].items()
        }
    return {
        "method": (
            f"one process, libllama loaded once and bound three times: ours as shipped "
            f"(generated/llama_bindings loading the compiled cffi API-mode module that "
            f"`llama-bindgen build` puts in the lib folder: cffi_api), ours in cffi ABI mode "
            f"(the fallback where no module is built: cffi_abi), and llama-cpp-python 0.3.36's "
            f"ctypes module (llama_cpp/llama_cpp.py from its sdist, LLAMA_CPP_LIB_PATH at the "
            f"same lib folder). Each repeat times {calls} calls (or {fills} fills of a 512-token "
            f"llama_batch) per implementation, interleaved; single-call figures have the empty "
            f"loop of the same repeat subtracted. batch fill: per-item loop as llama-cpp-python's "
            f"LlamaBatch.set_batch writes it; _slices: our runtime's fill (cffi slice assignment "
            f"for the flat arrays)."
        ),
        "n_vocab": raw["n_vocab"],
        "empty_loop_ns": Series("ns", empty).summary(),
        "ns": {impl: {c: s.summary() for c, s in cases.items()} for impl, cases in series.items()},
        "ratio_vs_ctypes": ratios,
    }
