"""The C driver's RPC part, the host's side (Windows under wine, where no Python of the
platform runs): two workers that are the driver itself (``mtp_smoke --rpc-serve``, see
``mtp_smoke_rpc.c``), the part's runs local and split over them, the devices they serve, what
llama.cpp does on a port where nothing listens and with a server of another protocol version,
and a worker killed mid-generation; gathered into ``driver.py``'s shape so that
:func:`generator.smoke.rpc_part.rpc_checks` judges both drivers.

The runtime's typed refusals are Python's and are checked where Python runs; here the record
is that llama.cpp itself ends the client process in those cases on this platform too.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from generator.platforms import Execution
from generator.smoke import driver_result
from generator.smoke.c_driver import N_THREADS, RUN_TIMEOUT_S, run_program
from generator.smoke.rpc_part import (
    ENDED,
    LOST_TIMEOUT_S,
    Ended,
    Worker,
    free_port,
    other_version_server,
    workers,
)

LOST_TOKENS = 8
# the driver's worker names the process id its platform knows it by
_WORKER_PROCESS = re.compile(r"rpc-server: serving .* process (\d+)")


def _model_args(run: Execution, part: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    """The driver's usual arguments for one of the part's runs: no strategies (its plain
    generation is the run) or the run's strategies and draft model."""
    args = [
        run.program_path(Path(part["path"])), str(part["max_tokens"]), str(part["n_ctx"]),
        str(part["draft_token_max"]), str(N_THREADS), "0",
        ",".join(str(int(t)) for t in part["prompt"]),
    ]  # fmt: skip
    if spec["strategies"]:
        draft = run.program_path(Path(spec["draft"])) if spec["draft"] else "-"
        args += [",".join(spec["strategies"]), draft]
    return args


def _tokens(spec: dict[str, Any], data: dict[str, Any] | None) -> list[int]:
    if data is None or not data.get("ok"):
        return []
    result = data.get("mtp" if spec["strategies"] else "plain")
    return list(result["tokens"]) if result else []


def _runs(
    run: Execution, exe: Path, part: dict[str, Any], split: list[str], log: Path
) -> tuple[dict[str, Any], str]:
    """Each run's tokens, local and split (``split``: the arguments before the usual ones), and
    llama.cpp's log of the split runs."""
    runs: dict[str, Any] = {}
    stderr = ""
    for spec in part["runs"]:
        args = _model_args(run, part, spec)
        local = run_program(run, exe, args, log, f"rpc {spec['name']}, local", RUN_TIMEOUT_S)
        remote = run_program(
            run, exe, split + args, log, f"rpc {spec['name']}, split", RUN_TIMEOUT_S
        )
        stderr += remote.stderr if remote is not None else ""
        runs[spec["name"]] = {
            "local": _tokens(spec, driver_result(local)[0] if local else None),
            "split": _tokens(spec, driver_result(remote)[0] if remote else None),
        }
    return runs, stderr


def _refusal(run: Execution, exe: Path, endpoint: str, log: Path, name: str) -> dict[str, str]:
    """What adding ``endpoint`` does in the driver: :data:`ENDED` when llama.cpp ends it."""
    proc = run_program(run, exe, ["--rpc-devices", endpoint], log, f"rpc {name}", LOST_TIMEOUT_S)
    if proc is None:
        return {"error_type": "hung", "reason": f"no end within {LOST_TIMEOUT_S} s"}
    ended = Ended(proc.returncode, proc.stdout, proc.stderr, run.dos_paths)
    kind = ENDED if ended.by_llama else "not ended by llama.cpp"
    return {"error_type": kind, "reason": f"exit {proc.returncode}; {ended.said()}"}


def _lost(
    run: Execution, exe: Path, part: dict[str, Any], split: list[str], victim: Worker, log: Path
) -> Ended | None:
    """The split run that kills ``victim`` after its first token."""
    found = _WORKER_PROCESS.search(victim.log.read_text(encoding="utf-8", errors="replace"))
    pid = found.group(1) if found else str(victim.process.pid)
    plain: dict[str, Any] = {"name": "plain", "strategies": [], "draft": None}
    args = _model_args(run, {**part, "max_tokens": LOST_TOKENS}, plain)
    argv = [*split, "--kill-after-first", pid, *args]
    proc = run_program(run, exe, argv, log, "rpc, a worker lost", LOST_TIMEOUT_S)
    if proc is None:
        return None
    return Ended(proc.returncode, proc.stdout, proc.stderr, run.dos_paths)


def run_rpc_part(
    run: Execution, exe: Path, plan: dict[str, Any], work: Path, log: Path
) -> dict[str, Any]:
    """The part in ``driver.py``'s shape, with ``servers``, the split runs' ``stderr`` and the
    lost worker's end (``lost``: an :class:`Ended` or None when the client hung)."""
    part = plan["rpc"]

    def worker_argv(port: int) -> list[str]:
        return [*run.prefix, str(exe), "--rpc-serve", f"127.0.0.1:{port}", "1"]

    env = {**os.environ, **run.env}
    with (
        workers(worker_argv, env, work, cwd=exe.parent) as started,
        other_version_server() as other,
    ):
        servers = [w.endpoint for w in started]
        split = ["--rpc", ",".join(servers), str(part["n_gpu_layers"])]
        runs, stderr = _runs(run, exe, part, split, log)
        listed = run_program(
            run, exe, ["--rpc-devices", ",".join(servers)], log, "rpc devices", 300
        )
        devices = (driver_result(listed)[0] or {}).get("devices", []) if listed else []
        refuse = {"nothing_listens": f"127.0.0.1:{free_port()}", "other_version": other}
        refusals = {name: _refusal(run, exe, at, log, name) for name, at in refuse.items()}
        lost = _lost(run, exe, part, split, started[-1], log)
    return {
        "runs": runs, "devices": devices, "refusals": refusals, "servers": servers,
        "stderr": stderr, "lost": lost,
    }  # fmt: skip
