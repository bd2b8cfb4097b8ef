"""The checks before an RPC endpoint reaches llama.cpp (which would end the process on each of
these), against stand-in servers on loopback: a server that answers the handshake with a given
version, one that closes the connection, one that answers the wrong size, one that never answers,
and a port where nothing listens. The real worker is tested in tests/mtp/test_rpc.py."""

from __future__ import annotations

import importlib
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

Behaviour = Callable[[socket.socket], None]


@pytest.fixture(scope="module")
def protocol(runtime: Any) -> Any:
    return importlib.import_module("llama_bindings.rpc_protocol")


@pytest.fixture(scope="module")
def errors(runtime: Any) -> Any:
    return importlib.import_module("llama_bindings.errors")


@contextmanager
def stand_in(behaviour: Behaviour) -> Iterator[tuple[str, int, list[bytes]]]:
    """A one-connection server on 127.0.0.1: ``behaviour`` gets the accepted socket; the
    request bytes it read are collected for the test."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    received: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(5)
            header = conn.recv(9)
            received.append(header)
            if len(header) == 9:
                (size,) = struct.unpack("<Q", header[1:])
                received.append(conn.recv(size))
            behaviour(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield "127.0.0.1", port, received
    finally:
        listener.close()
        thread.join(timeout=10)


def answer(version: tuple[int, int, int], size: int = 28) -> Behaviour:
    def send(conn: socket.socket) -> None:
        body = bytes([*version, 0]) + bytes(24)
        conn.sendall(struct.pack("<Q", size) + body[:size])

    return send


def test_a_server_of_the_same_major_version_passes(protocol: Any) -> None:
    with stand_in(answer((8, 0, 0))) as (host, port, received):
        version = protocol.check_server(protocol.Endpoint(host, port), (8, 0, 0), timeout=5)
    assert version == (8, 0, 0)
    # the request is the handshake llama.cpp sends: HELLO (14), 24 capability bytes, all zero
    assert received == [bytes([14]) + struct.pack("<Q", 24), bytes(24)]


def test_an_older_minor_version_passes_and_a_newer_one_does_not(protocol: Any, errors: Any) -> None:
    with stand_in(answer((8, 0, 3))) as (host, port, _):
        assert protocol.check_server(protocol.Endpoint(host, port), (8, 1, 0), 5) == (8, 0, 3)
    with stand_in(answer((8, 2, 0))) as (host, port, _):
        with pytest.raises(errors.LlamaRpcVersionError) as info:
            protocol.check_server(protocol.Endpoint(host, port), (8, 1, 0), 5)
    assert (info.value.server, info.value.client) == ((8, 2, 0), (8, 1, 0))


def test_another_major_version_is_refused_naming_both(protocol: Any, errors: Any) -> None:
    with stand_in(answer((7, 0, 0))) as (host, port, _):
        with pytest.raises(errors.LlamaRpcVersionError) as info:
            protocol.check_server(protocol.Endpoint(host, port), (8, 0, 0), 5)
    message = str(info.value)
    assert f"RPC server 127.0.0.1:{port}" in message
    assert "protocol 7.0.0" in message and "speak 8.0.0" in message
    assert isinstance(info.value, errors.LlamaRpcError)


def test_a_server_that_closes_the_connection_fails_the_handshake(
    protocol: Any, errors: Any
) -> None:
    with stand_in(lambda conn: None) as (host, port, _):
        with pytest.raises(errors.LlamaRpcHandshakeError, match="closed the connection"):
            protocol.check_server(protocol.Endpoint(host, port), (8, 0, 0), 5)


def test_an_answer_of_another_size_fails_the_handshake(protocol: Any, errors: Any) -> None:
    with stand_in(answer((8, 0, 0), size=12)) as (host, port, _):
        with pytest.raises(errors.LlamaRpcHandshakeError, match="is 12 bytes, not 28"):
            protocol.check_server(protocol.Endpoint(host, port), (8, 0, 0), 5)


def test_a_server_that_never_answers_runs_out_of_time(protocol: Any, errors: Any) -> None:
    done = threading.Event()
    with stand_in(lambda conn: done.wait(10)) as (host, port, _):
        with pytest.raises(errors.LlamaRpcHandshakeError, match="serves one client at a time"):
            protocol.check_server(protocol.Endpoint(host, port), (8, 0, 0), timeout=0.5)
        done.set()


def test_a_port_where_nothing_listens_is_unreachable(protocol: Any, errors: Any) -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # free once closed
    with pytest.raises(errors.LlamaRpcUnreachableError, match="cannot connect"):
        protocol.check_server(protocol.Endpoint("127.0.0.1", port), (8, 0, 0), 5)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("127.0.0.1", ValueError),
        (":50052", ValueError),
        ("host:0", ValueError),
        ("host:65536", ValueError),
        ("host:port", ValueError),
        ("[::1]:50052", ValueError),
        (50052, TypeError),
    ],
)
def test_endpoints_llama_cpp_could_not_read_are_refused(
    protocol: Any, text: object, error: type[Exception]
) -> None:
    with pytest.raises(error):
        protocol.parse_endpoint(text)


def test_an_endpoint_is_host_and_port(protocol: Any) -> None:
    endpoint = protocol.parse_endpoint("localhost:50052")
    assert (endpoint.host, endpoint.port, str(endpoint)) == ("localhost", 50052, "localhost:50052")
