"""The RPC worker's command line and ``Model(rpc_servers=...)``: what is refused before any library
is loaded."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="module")
def worker(runtime: Any) -> Any:
    return importlib.import_module("llama_bindings.rpc_worker")


def test_the_worker_listens_on_loopback_by_default(worker: Any) -> None:
    args = worker.parse_args(["--port", "50100"])
    assert (args.host, args.port, args.allow_remote) == ("127.0.0.1", 50100, False)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.7", "worker.example"])
def test_a_non_loopback_address_needs_the_explicit_flag(
    worker: Any, host: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        worker.parse_args(["--host", host])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"--host {host} is not a loopback address" in err and "--allow-remote" in err
    assert worker.parse_args(["--host", host, "--allow-remote"]).host == host


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.1", "::1", "localhost"])
def test_loopback_addresses_are_known(worker: Any, host: str) -> None:
    assert worker.is_loopback(host)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--port", "0"], "--port must be from 1 to 65535"),
        (["--port", "70000"], "--port must be from 1 to 65535"),
        (["--threads", "0"], "--threads must be at least 1"),
        (["--host", "::1"], "--host cannot hold ':'"),
    ],
)
def test_bad_worker_arguments_are_refused(
    worker: Any, args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        worker.parse_args(args)
    assert says in capsys.readouterr().err


def test_the_package_entry_point_names_its_command(
    runtime: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    main = importlib.import_module("llama_bindings.__main__").main
    assert main(["generate"]) == 2
    assert "unknown command 'generate'" in capsys.readouterr().err
    assert main(["serve"]) == 2  # no model
    assert "a model is needed" in capsys.readouterr().err
    assert main([]) == 2


@pytest.mark.parametrize(
    ("servers", "error"),
    [
        ("127.0.0.1:50052", TypeError),
        ([], ValueError),
        (["127.0.0.1"], ValueError),
        (["127.0.0.1:50052", "127.0.0.1:50052"], ValueError),
    ],
)
def test_bad_rpc_servers_are_refused_before_loading(
    runtime: Any, tmp_path: Path, servers: object, error: type[Exception]
) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    with pytest.raises(error):
        runtime.Model(model, rpc_servers=servers, lib_dir=tmp_path / "no-libraries-here")
