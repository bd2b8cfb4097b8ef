"""``llama-bindings serve`` as a process of its own on loopback, for tests that talk to it with
real clients: started from the committed ``generated/`` package with one build's libraries,
ready once ``/health`` answers, stopped with SIGTERM (its exit status checked)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from generator.smoke.rpc_part import free_port
from tests.runtime.conftest import BINDINGS_PARENT

READY_WAIT_S = 120.0  # loading the model; a server that never answers fails the test


class LiveServer:
    def __init__(self, process: subprocess.Popen[str], port: int, log: Path) -> None:
        self.process, self.port, self.log = process, port, log
        self.base_url = f"http://127.0.0.1:{port}"

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> int:
        """SIGTERM, then the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=READY_WAIT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"the server did not stop on SIGTERM:\n{self.output()}") from None


@contextmanager
def live_server(
    lib_dir: Path, args: Sequence[str], log: Path, env: dict[str, str] | None = None
) -> Iterator[LiveServer]:
    """A server started with ``args`` (after ``serve``; host and port are chosen here)."""
    port = free_port()
    environ = {
        **os.environ,
        "LLAMA_BINDGEN_LIB_DIR": str(lib_dir),
        "PYTHONPATH": os.pathsep.join([str(BINDINGS_PARENT), os.environ.get("PYTHONPATH", "")]),
        **(env or {}),
    }
    command = [sys.executable, "-m", "llama_bindings", "serve", *args,
               "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(
            command, env=environ, stdout=out, stderr=subprocess.STDOUT, text=True
        )
    server = LiveServer(process, port, log)
    try:
        deadline = time.monotonic() + READY_WAIT_S
        while True:
            if process.poll() is not None:
                raise AssertionError(
                    f"the server exited ({process.returncode}):\n{server.output()}"
                )
            try:
                with urllib.request.urlopen(f"{server.base_url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"the server never answered /health:\n{server.output()}")
            time.sleep(0.2)
        yield server
    finally:
        server.stop()
