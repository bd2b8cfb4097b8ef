"""Section "rpc": what llama.cpp's RPC protocol costs. The same greedy generation with the model
local and with it split over this machine's CPU and two RPC workers on loopback (``python -m
llama_bindings rpc-server`` of the same build, one thread each), on the synthetic MTP test model
and on Gemma 3 270M Q4_K_M; plain and with draft-mtp (test model only: Gemma 3 has no MTP
head). Each run is a process of its own (``bench.rpc_worker``): the model's load time and the
generation's tokens per second are measured inside it; the ratios split / local are taken per
repeat between runs measured side by side. The workers run for the whole section, so a split
run's load includes sending the weights (no tensor cache). Both sides load with
``use_extra_bufts=False``: a worker's CPU device keeps the weights in the file's layout (ggml's
repacked CPU layouts do not go through RPC), so a local run with them computes a quantized model
differently in the last bits and may pick other greedy tokens.

Loopback has no network latency and the workers share this machine's cores with the client: the
figures are the protocol's own overhead (serialisation, one request per graph split), not a
network's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.stats import Series, log, ratio_series, run_measured
from generator.smoke.rpc_part import free_port

PROMPT = "The lighthouse on Gull Point had been dark for eleven years when"
TEST_PROMPT = [*range(10, 30)]
WORKERS = 2


@dataclass(frozen=True)
class Setup:
    repo: Path
    bindings: Path  # the folder holding the llama_bindings package that fits lib_dir
    lib_dir: Path
    models: dict[str, Path]  # "test" (MTP test model), "gemma" (Gemma 3 270M)
    n: int
    threads: int


@contextmanager
def workers(setup: Setup, logs: Path) -> Iterator[list[str]]:
    env = dict(os.environ, PYTHONPATH=str(setup.bindings))
    env["LLAMA_BINDGEN_LIB_DIR"] = str(setup.lib_dir)
    started: list[subprocess.Popen[bytes]] = []
    endpoints: list[str] = []
    try:
        for index in range(WORKERS):
            port = free_port()
            args = [sys.executable, "-m", "llama_bindings", "rpc-server", "--port", str(port)]
            with (logs / f"worker-{index}.log").open("wb") as out:
                started.append(
                    subprocess.Popen(
                        [*args, "--threads", "1"], stdout=out, stderr=subprocess.STDOUT, env=env
                    )
                )
            endpoints.append(f"127.0.0.1:{port}")
        yield endpoints
    finally:
        for process in started:
            process.terminate()
        for process in started:
            process.wait(timeout=30)


def run_one(setup: Setup, spec: dict[str, Any]) -> dict[str, Any]:
    env = {"PYTHONPATH": f"{setup.bindings}:{setup.repo}"}
    r = run_measured([sys.executable, "-m", "bench.rpc_worker", json.dumps(spec)], env)
    if r.returncode != 0:
        raise RuntimeError(f"rpc worker run {spec['name']} failed:\n{r.stderr[-2000:]}")
    fig: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    return fig


def configurations(setup: Setup, servers: list[str]) -> list[dict[str, Any]]:
    """Every run of a repeat: per model and mode, local then split (split first in every other
    repeat is the caller's choice)."""
    runs = []
    for model, modes in (("test", ("plain", "draft-mtp")), ("gemma", ("plain",))):
        prompt: Any = TEST_PROMPT if model == "test" else PROMPT
        for mode in modes:
            for where in ("local", "split"):
                runs.append({
                    "name": f"{model} {mode} {where}", "model": str(setup.models[model]),
                    "prompt": prompt, "n": setup.n, "threads": setup.threads,
                    "lib_dir": str(setup.lib_dir), "mode": mode,
                    "servers": servers if where == "split" else [],
                    # the test model: its last 3 layers on the workers; Gemma 3 270M (18 layers
                    # and the output): the last 12, 6 on each
                    "n_gpu_layers": 3 if model == "test" else 12,
                })  # fmt: skip
    return runs


def summarise(figs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    names = sorted({name.rsplit(" ", 1)[0] for name in figs})
    for base in names:
        local, split = figs[f"{base} local"], figs[f"{base} split"]
        series = {
            f"{where}_{key}": Series(unit, [float(f[key]) for f in runs])
            for where, runs in (("local", local), ("split", split))
            for key, unit in (("tokens_per_second", "tok/s"), ("load_s", "s"))
        }
        out[base] = {name: s.summary() for name, s in series.items()}
        out[base]["tps_split_over_local"] = ratio_series(
            series["split_tokens_per_second"], series["local_tokens_per_second"]
        ).summary()
        out[base]["load_split_over_local"] = ratio_series(
            series["split_load_s"], series["local_load_s"]
        ).summary()
        out[base]["same_tokens"] = all(
            a["tokens"] == b["tokens"] for a, b in zip(local, split, strict=True)
        )
    return out


def run(setup: Setup, work: Path, repeats: int) -> dict[str, Any]:
    figs: dict[str, list[dict[str, Any]]] = {}
    with workers(setup, work) as servers:
        from_bindings = f"{setup.bindings}:{setup.repo}"
        wait = "from llama_bindings.runtime import wait_for_rpc_server as w; import sys; "
        wait += "[w(s, 120) for s in sys.argv[1:]]"
        subprocess.run([sys.executable, "-c", wait, *servers], check=True,
                       env=dict(os.environ, PYTHONPATH=from_bindings))  # fmt: skip
        runs = configurations(setup, servers)
        for repeat in range(repeats):
            log(f"rpc: repeat {repeat + 1}/{repeats}")
            ordered = runs if repeat % 2 == 0 else [*runs[1::2], *runs[0::2]]
            for spec in ordered:
                figs.setdefault(spec["name"], []).append(run_one(setup, spec))
    return {
        "method": __doc__.strip() if __doc__ else "",
        "repeats": repeats,
        "n": setup.n,
        "runs": summarise(figs),
    }
