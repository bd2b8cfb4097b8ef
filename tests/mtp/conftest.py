"""Fixtures for the runtime and smoke tests: one host build, the committed bindings, test models.

The runtime is imported in-process from ``generated/`` (the committed package, kept current by
tests/gen/test_emit.py) with the libraries of one session-scoped build (reused when up to date).
"""

from __future__ import annotations

import importlib
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from generator.errors import BindgenError
from generator.native.build import BuildResult, build_native
from generator.smoke.rpc_part import free_port as free_port
from tests.runtime.conftest import BINDINGS_PARENT as BINDINGS_PARENT
from tests.runtime.conftest import committed_runtime


def build_or_fail(tree: Path, platform: str) -> BuildResult:
    try:
        return build_native(tree, platform)
    except BindgenError as exc:
        pytest.fail(f"native build of {platform} failed: {exc}")


@pytest.fixture(scope="session")
def host_build(tree_pin: Path) -> BuildResult:
    return build_or_fail(tree_pin, "linux-x86_64")


@pytest.fixture(scope="session")
def runtime(host_build: BuildResult) -> Any:
    """The generated ``llama_bindings.runtime`` package, its libraries built."""
    return committed_runtime()


@pytest.fixture(scope="session")
def libs(runtime: Any, host_build: BuildResult) -> Any:
    return importlib.import_module("llama_bindings").load(host_build.lib_dir)


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from generator.testdrafts import DRAFT_KINDS, write_test_draft
    from generator.testmodel import KINDS, write_test_model

    folder = tmp_path_factory.mktemp("mtp-models")
    written = {kind: write_test_model(folder / f"{kind}.gguf", kind, seed=0) for kind in KINDS}
    for kind in DRAFT_KINDS:
        written[kind] = write_test_draft(folder / f"{kind}.gguf", kind, seed=0)
    return written


# A chatml template as model files carry it (Jinja); llama.cpp recognises it by its markers.
CHATML_JINJA = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@pytest.fixture(scope="session")
def byte_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Models with the ``bytes`` vocabulary: ``agree`` (with the chatml template in its GGUF)
    and ``plain`` (no template)."""
    from generator.testmodel import BYTES_VOCAB_MIN, write_test_model

    folder = tmp_path_factory.mktemp("byte-models")
    common: dict[str, Any] = {"vocabulary": "bytes", "vocab": BYTES_VOCAB_MIN}
    return {
        "agree": write_test_model(
            folder / "agree.gguf", "agree", chat_template=CHATML_JINJA, **common
        ),
        "plain": write_test_model(folder / "plain.gguf", "plain", **common),
    }


def mtp_spec(runtime: Any, **options: Any) -> Any:
    return runtime.SpeculativeDecoding(runtime.SpeculativeMode.DRAFT_MTP, **options)


def generate(
    runtime: Any, libs: Any, model: Path, *, mtp: bool, prompt: Any = (10, 11, 12), **kwargs: Any
) -> Any:
    """One generation on a fresh model and context."""
    spec = mtp_spec(runtime) if mtp else runtime.SpeculativeDecoding()
    with runtime.Model(model, load_mtp=mtp, libs=libs) as loaded:
        with runtime.Context(loaded, n_ctx=256, speculative=spec) as ctx:
            return ctx.generate(list(prompt), **kwargs)


def log_softmax_after(runtime: Any, model: Any, prompt: list[int]) -> list[float]:
    """The log-probabilities after ``prompt``, computed here in plain Python from the logits of
    a bare llama_decode (the runtime's numpy path is not used)."""
    llama, ffi = model.llama, model.ffi
    with runtime.Context(model, n_ctx=128) as ctx:
        buf = ffi.new("llama_token[]", prompt)
        assert llama.llama_decode(ctx.handle, llama.llama_batch_get_one(buf, len(prompt))) == 0
        logits = ffi.unpack(llama.llama_get_logits_ith(ctx.handle, -1), model.n_vocab)
    peak = max(logits)
    total = peak + math.log(math.fsum(math.exp(x - peak) for x in logits))
    return [x - total for x in logits]


def worker_env(host_build: BuildResult) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(BINDINGS_PARENT))
    env["LLAMA_BINDGEN_LIB_DIR"] = str(host_build.lib_dir)
    return env


@pytest.fixture(scope="module")
def rpc_servers(
    runtime: Any, host_build: BuildResult, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[str]]:
    """Two workers; their output kept in the test's temporary folder."""
    logs = tmp_path_factory.mktemp("rpc-workers")
    ports = [free_port() for _ in range(2)]
    processes = []
    for port in ports:
        args = [sys.executable, "-m", "llama_bindings", "rpc-server", "--port", str(port)]
        with (logs / f"{port}.log").open("wb") as out:
            process = subprocess.Popen(
                [*args, "--threads", "1"], stdout=out, stderr=subprocess.STDOUT,
                env=worker_env(host_build),
            )  # fmt: skip
        processes.append(process)
    endpoints = [f"127.0.0.1:{port}" for port in ports]
    try:
        for endpoint in endpoints:
            assert runtime.wait_for_rpc_server(endpoint, timeout=60) == (8, 0, 0)
        yield endpoints
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
