"""The smoke's RPC part, the host's side: two RPC workers from the build under test on
loopback (``python -m llama_bindings rpc-server`` run by the platform's Python, natively or under
qemu; or, where only the C driver runs, the driver's ``--rpc-serve``: :mod:`generator.smoke.c_rpc`),
a stand-in server that answers the handshake as protocol 1.0.0 (the gate has no real worker of
another version at hand; ``tests/mtp/test_rpc.py`` runs one), a port where nothing listens, and
the checks over what either driver reports.

What is checked: greedy output with the target split over this machine and both workers equals
the local run's, plain, with draft-mtp and with draft-simple (draft model local); llama.cpp put
weights on both workers; the workers' devices are listed with their memory; the dead port and the
other version give the runtime's typed errors (the Python driver) or, where the runtime cannot
run, end the process in llama.cpp (the C driver); and a worker killed mid-generation ends the
client process (llama.cpp's ``GGML_ABORT``: the case the runtime cannot check first)."""

from __future__ import annotations

import json
import os
import re
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator.emit import PACKAGE_NAME
from generator.emit.wrapper_contract import STRATEGY_PREFIX, strategy_name
from generator.progress import ticking

WORKERS = 2
STARTUP_TIMEOUT_S = 120  # a worker under qemu loads its libraries slowly
LOST_TIMEOUT_S = 300
# the stand-in's answer: protocol 1.0.0, the padding byte and 24 capability bytes
STAND_IN_VERSION = (1, 0, 0)
# llama.cpp names a worker's buffer after its device on that worker and the worker's endpoint
_RPC_BUFFER = re.compile(r"\bRPC\d+\[([^\]]+)\] model buffer size")
_CPU_BUFFER = re.compile(r"\bCPU(?:_Mapped)? model buffer size")


@dataclass
class Worker:
    endpoint: str
    process: subprocess.Popen[bytes]
    log: Path


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return int(probe.getsockname()[1])


def _wait_until_listening(worker: Worker) -> None:
    host, port = worker.endpoint.split(":")
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if worker.process.poll() is not None:
            tail = worker.log.read_text(encoding="utf-8", errors="replace")[-1500:]
            raise RuntimeError(f"the RPC worker {worker.endpoint} exited at start:\n{tail}")
        log = worker.log.read_text(encoding="utf-8", errors="replace")
        if "rpc-server: serving" in log:
            with suppress(OSError), socket.create_connection((host, int(port)), timeout=1):
                return  # an empty connection: the worker logs it and waits for the next
        time.sleep(0.2)
    raise RuntimeError(f"the RPC worker {worker.endpoint} did not listen within "
                       f"{STARTUP_TIMEOUT_S} s")  # fmt: skip


def python_worker(
    command: list[str], lib_dir: Path | None, bindings_parent: Path
) -> tuple[Callable[[int], list[str]], dict[str, str]]:
    """A worker of the platform's Python (``python -m llama_bindings rpc-server``): its command
    line for a port, and its environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("LLAMA_BINDGEN_LIB_DIR", "PYTHONHOME")}
    env["PYTHONPATH"] = str(bindings_parent.resolve())
    env["PYTHONDONTWRITEBYTECODE"] = "1"

    def argv(port: int) -> list[str]:
        args = [*command, "-m", PACKAGE_NAME, "rpc-server", "--port", str(port), "--threads", "1"]
        return args + (["--lib-dir", str(lib_dir.resolve())] if lib_dir is not None else [])

    return argv, env


@contextmanager
def workers(
    argv: Callable[[int], list[str]], env: dict[str, str], work: Path, cwd: Path | None = None
) -> Iterator[list[Worker]]:
    """``WORKERS`` RPC workers on 127.0.0.1, each a process ``argv(port)`` (the Python
    worker, :func:`python_worker`, or the C driver's ``--rpc-serve``); stopped (and their logs
    kept in ``work``) on leaving."""
    started: list[Worker] = []
    try:
        for index in range(WORKERS):
            port = free_port()
            log = work / f"rpc-worker-{index}.log"
            with log.open("wb") as out:
                process = subprocess.Popen(
                    argv(port), stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd
                )
            started.append(Worker(f"127.0.0.1:{port}", process, log))
        with ticking("smoke: the RPC workers start"):
            for worker in started:
                _wait_until_listening(worker)
        yield started
    finally:
        for worker in started:
            if worker.process.poll() is None:
                worker.process.terminate()
        for worker in started:
            with suppress(subprocess.TimeoutExpired):
                worker.process.wait(timeout=30)
            if worker.process.poll() is None:
                worker.process.kill()
                worker.process.wait()


@contextmanager
def other_version_server() -> Iterator[str]:
    """A loopback server that answers every RPC handshake as protocol ``STAND_IN_VERSION``."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(10)
                with suppress(OSError):
                    conn.recv(9 + 24)
                    body = bytes([*STAND_IN_VERSION, 0]) + bytes(24)
                    conn.sendall(struct.pack("<Q", len(body)) + body)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


def rpc_plan(
    target: str, draft: str, prompt: list[int], max_tokens: int, draft_max: int
) -> dict[str, Any]:
    """The part's models, runs and sizes (servers and refusals are added once they are
    running): plain, draft-mtp, and draft-simple with ``draft`` (strategy names by the wrapper
    header's rule)."""
    mtp, simple = (strategy_name(STRATEGY_PREFIX + m) for m in ("DRAFT_MTP", "DRAFT_SIMPLE"))
    return {
        "path": target,
        "runs": [
            {"name": "plain", "strategies": [], "draft": None},
            {"name": mtp, "strategies": [mtp], "draft": None},
            {"name": simple, "strategies": [simple], "draft": draft},
        ],
        "prompt": prompt,
        "max_tokens": max_tokens,
        "n_ctx": 512,
        "draft_token_max": draft_max,
        # the test model's last three layers (of 2 trunk, 1 NextN and the output) go to the
        # workers, by llama.cpp's rule for tensor_split [1, 1]: the first trunk layer, the
        # token embeddings and, without load_mtp, the NextN layer's place stay on this CPU
        "n_gpu_layers": 3,
    }


# what the runtime raises before llama.cpp is asked (the Python driver) ...
PYTHON_REFUSALS = {
    "nothing_listens": "LlamaRpcUnreachableError",
    "other_version": "LlamaRpcVersionError",
}
# ... and, where only the C driver runs, what llama.cpp itself does: it ends the process
ENDED = "process ended by llama.cpp"
C_REFUSALS = dict.fromkeys(PYTHON_REFUSALS, ENDED)
# abort() in a Windows program (MinGW's C runtime, under wine too) exits with status 3
WINDOWS_ABORT_STATUS = 3


@dataclass(frozen=True)
class Ended:
    """How a client process ended: its exit status (negative: a signal), output and platform."""

    returncode: int
    stdout: str
    stderr: str
    windows: bool = False

    @property
    def by_llama(self) -> bool:
        """Ended by llama.cpp (GGML_ABORT, or SIGPIPE on a lost connection), not by the driver:
        a signal on POSIX, abort()'s status on Windows."""
        if self.windows:
            return self.returncode == WINDOWS_ABORT_STATUS
        return self.returncode < 0

    @property
    def printed_result(self) -> bool:
        """The client printed its result (a JSON object on its last stdout line), which either
        driver does only when it outlived the worker."""
        lines = self.stdout.strip().splitlines()
        try:
            return bool(lines) and isinstance(json.loads(lines[-1]), dict)
        except json.JSONDecodeError:
            return False

    def said(self) -> str:
        """The last line of stderr about RPC or the abort."""
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        hits = [line for line in lines if "RPC" in line or "abort" in line.lower()]
        return (hits or lines or [""])[-1][:200]


def rpc_checks(
    part: dict[str, Any], stderr: str, servers: list[str], refusals: dict[str, str]
) -> list[Any]:
    """The checks over a driver's RPC result and llama.cpp's log of its split runs;
    ``refusals``: what each refused endpoint must give (:data:`PYTHON_REFUSALS` or
    :data:`C_REFUSALS`)."""
    from generator.smoke import Check

    if "absent" in part:
        return [Check("RPC backend present", False, str(part["absent"]))]
    checks = []
    for kind, run in part["runs"].items():
        same = run["local"] == run["split"] and bool(run["local"])
        detail = "" if same else f"local {run['local'][:12]} vs split {run['split'][:12]}"
        checks.append(Check(f"rpc {kind}: split over 2 workers equals local", same, detail))
    buffers = sorted(set(_RPC_BUFFER.findall(stderr)))
    on_cpu = bool(_CPU_BUFFER.search(stderr))
    split = buffers == sorted(servers) and on_cpu
    shown = ", ".join(buffers) + ("; and this CPU" if on_cpu else "; none on this CPU")
    checks.append(Check("rpc: weights on this CPU and on both workers", split, shown))
    remote = [d for d in part["devices"] if d["endpoint"]]
    shown = ", ".join(f"{d['name']}@{d['endpoint']} {d['memory_total']} B" for d in remote)
    every = sorted({d["endpoint"] for d in remote}) == sorted(servers)
    checks.append(Check("rpc: the workers' devices listed with memory", every, shown))
    for name, expected in refusals.items():
        got = part["refusals"].get(name, {})
        ok = got.get("error_type") == expected
        checks.append(Check(f"rpc {name}: {expected}", ok, got.get("reason", "")))
    return checks


def lost_worker_check(ended: Ended | None) -> Any:
    """A worker killed mid-generation: llama.cpp ends the client process (no result)."""
    from generator.smoke import Check

    name = "rpc: a worker lost mid-generation ends the client (llama.cpp aborts; not catchable)"
    if ended is None:
        return Check(name, False, f"the client hung for {LOST_TIMEOUT_S} s")
    ok = ended.by_llama and not ended.printed_result
    return Check(name, ok, f"exit {ended.returncode}; {ended.said()}")


def run_lost_worker(
    command: list[str], driver: Path, plan_path: Path, env: dict[str, str]
) -> Ended | None:
    with ticking("smoke: a worker is stopped mid-generation"):
        try:
            proc = subprocess.run(
                [*command, str(driver), str(plan_path)],
                capture_output=True, text=True, env=env, timeout=LOST_TIMEOUT_S, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return None
    return Ended(proc.returncode, proc.stdout, proc.stderr)
