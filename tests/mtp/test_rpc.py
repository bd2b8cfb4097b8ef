"""RPC through the runtime with real workers: two ``python -m llama_bindings rpc-server``
processes of the host build on loopback. Every speculative mode with the target split over this
machine and both workers gives the local run's tokens; the workers' devices are listed; two models
of one process share a worker; the worker's own refusals; a real worker of another protocol
version (63d93d1's own bindings and libraries) is refused. (The smoke's RPC part, run by
test_smoke.py, adds the lost-worker case and a stand-in of another version on every platform.)"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from generator.emit import emit_package
from generator.native.build import BuildResult
from generator.parse.frontend import ParseOptions, parse_interface, tree_source
from generator.sources.licenses import llama_license
from generator.sources.rpc_api import protocol_version
from tests.mtp.conftest import build_or_fail, free_port, worker_env

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

PROMPT = [*range(10, 30), *range(10, 30), *range(10, 30), *range(10, 14)]
MAX_TOKENS = 32
# the last three layers on the workers (the test model's trunk layer 1 and NextN layer on the
# first, the output on the second); its first trunk layer and the embeddings on this machine
SPLIT = {"n_gpu_layers": 3, "tensor_split": [1.0, 1.0]}


def _generate(
    runtime: Any, libs: Any, model: Path, spec: Any, mtp: bool, split: list[str] | None
) -> list[int]:
    options: dict[str, Any] = {"rpc_servers": split, **SPLIT} if split else {}
    with runtime.Model(model, load_mtp=mtp, libs=libs, **options) as loaded:
        with runtime.Context(loaded, n_ctx=256, speculative=spec) as ctx:
            return list(ctx.generate(PROMPT, max_tokens=MAX_TOKENS).tokens)


@pytest.fixture(scope="module")
def local_tokens(runtime: Any, libs: Any, models: dict[str, Path]) -> list[int]:
    spec = runtime.SpeculativeDecoding()
    tokens = _generate(runtime, libs, models["partial"], spec, False, None)
    assert len(tokens) == MAX_TOKENS
    return tokens


def test_plain_generation_split_over_two_workers_equals_local(
    runtime: Any,
    libs: Any,
    models: dict[str, Path],
    rpc_servers: list[str],
    local_tokens: list[int],
) -> None:
    spec = runtime.SpeculativeDecoding()
    assert _generate(runtime, libs, models["partial"], spec, False, rpc_servers) == local_tokens


@pytest.mark.parametrize(
    "kind",
    ["draft-mtp", "draft-simple", "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod",
     "ngram-cache"],
)  # fmt: skip
def test_every_speculative_mode_with_a_split_target_equals_local(
    runtime: Any,
    libs: Any,
    models: dict[str, Path],
    rpc_servers: list[str],
    local_tokens: list[int],
    kind: str,
) -> None:
    """The draft side stays local (draft-simple's draft model, n-gram state); the target is
    split; greedy output is plain local decoding's."""
    draft = runtime.Model(models["draft"], libs=libs) if kind == "draft-simple" else None
    try:
        spec = runtime.SpeculativeDecoding(strategies=(kind,), draft_model=draft, draft_token_max=8)
        tokens = _generate(runtime, libs, models["partial"], spec, kind == "draft-mtp", rpc_servers)
    finally:
        if draft is not None:
            draft.close()
    assert tokens == local_tokens


def test_the_workers_devices_are_listed_with_their_memory(
    runtime: Any, libs: Any, rpc_servers: list[str]
) -> None:
    listed = runtime.list_devices(libs, rpc_servers=rpc_servers)
    local = [d for d in listed if not d.endpoint]
    remote = [d for d in listed if d.endpoint]
    assert [d.type for d in local] == ["cpu"]
    assert sorted(d.endpoint for d in remote) == sorted(rpc_servers)
    for device in remote:
        assert device.name.startswith("RPC") and device.description == device.endpoint
        assert 0 < device.memory_free <= device.memory_total


def test_two_live_models_share_a_worker(
    runtime: Any, libs: Any, models: dict[str, Path], rpc_servers: list[str]
) -> None:
    """The worker serves one client, this process: the second model is not checked again (the
    check would wait on the busy server) and loads over the same connection."""
    with runtime.Model(
        models["agree"], libs=libs, rpc_servers=rpc_servers[:1], n_gpu_layers=1
    ) as a:
        with runtime.Model(models["plain"], libs=libs, rpc_servers=rpc_servers[:1], n_gpu_layers=1):
            assert not a.closed


def test_a_port_where_nothing_listens_is_refused_and_the_process_goes_on(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    with pytest.raises(runtime.LlamaRpcUnreachableError, match=nowhere):
        runtime.Model(models["plain"], libs=libs, rpc_servers=[nowhere], n_gpu_layers=1)


def test_a_worker_refuses_a_port_in_use(host_build: BuildResult) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "llama_bindings", "rpc-server", "--port", str(port)],
            capture_output=True, text=True, env=worker_env(host_build), timeout=60, check=False,
        )  # fmt: skip
    assert proc.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr and "Traceback" not in proc.stderr


def test_sigterm_stops_a_worker(host_build: BuildResult, runtime: Any) -> None:
    port = free_port()
    worker = subprocess.Popen(
        [sys.executable, "-m", "llama_bindings", "rpc-server", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=worker_env(host_build),
    )  # fmt: skip
    try:
        runtime.wait_for_rpc_server(f"127.0.0.1:{port}", timeout=60)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == -signal.SIGTERM
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert worker.stdout is not None
    assert b"llama-bindings rpc-server: serving CPU on 127.0.0.1:" in worker.stdout.read()


def test_a_real_worker_of_another_protocol_version_is_refused(
    runtime: Any,
    libs: Any,
    host_build: BuildResult,
    models: dict[str, Path],
    tree_63d93d1: Path,
    tmp_path: Path,
) -> None:
    """63d93d1's worker (its own emitted bindings over its own build, RPC protocol 4.0.0, as a
    user of that release would run it) against the pin's runtime: the version check refuses it
    with the typed error, before llama.cpp's handshake would end this process."""
    build = build_or_fail(tree_63d93d1, "linux-x86_64")
    api = parse_interface(
        ParseOptions(tree_63d93d1, wrapper_header=None), tree_source(tree_63d93d1)
    )
    emit_package(api, tmp_path / "old", llama_license=llama_license(tree_63d93d1))
    port = free_port()
    env = dict(worker_env(build), PYTHONPATH=str(tmp_path / "old"))
    worker = subprocess.Popen(
        [sys.executable, "-m", "llama_bindings", "rpc-server", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
    )  # fmt: skip
    endpoint = f"127.0.0.1:{port}"
    try:
        with pytest.raises(runtime.LlamaRpcVersionError, match=endpoint) as waited:
            runtime.wait_for_rpc_server(endpoint, timeout=60)  # refused once it answers
        # the versions each tree's header states, as each side's handshake told them
        assert ".".join(map(str, waited.value.server)) == protocol_version(api)
        assert ".".join(map(str, waited.value.client)) == host_build.info["rpc_protocol"]
        with pytest.raises(runtime.LlamaRpcVersionError, match=endpoint) as refused:
            runtime.Model(models["plain"], libs=libs, rpc_servers=[endpoint], n_gpu_layers=1)
        assert refused.value.server == waited.value.server
    finally:
        worker.kill()
        worker.wait()
    assert worker.stdout is not None
    assert b"serving CPU on 127.0.0.1:" in worker.stdout.read()  # 63d93d1's worker ran
