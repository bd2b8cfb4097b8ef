"""What the runtime checks before it hands an RPC endpoint to llama.cpp.

llama.cpp's RPC client (``ggml/src/ggml-rpc/ggml-rpc.cpp``) ends the process with ``GGML_ABORT``
when it cannot connect to a server, when the handshake fails and when the server speaks another
protocol version, even inside ``ggml_backend_rpc_add_server``. A binding cannot catch that, so
:func:`check_server` does those three checks first, on a connection of its own, and raises a
typed :class:`~llama_bindings.errors.LlamaRpcError` instead; only then does the runtime call
llama.cpp.

The wire facts it relies on (read from ``ggml-rpc.cpp``; the same from b9246 to b11549): a request
is the command byte, the request's size as an unsigned 64-bit integer and its bytes; a response is
its size and its bytes (the integers in the machine's byte order: little-endian on every platform
built here). ``HELLO`` is command 14 (upstream asserts it never changes); its request is the
client's 24 transport-capability bytes (all zero: plain TCP, nothing to upgrade to), and its
response the server's major, minor and patch version, one padding byte and 24 capability bytes.
A server that expects another request size logs it and closes the connection. A ggml-rpc server
serves one client at a time, so a server busy with another client does not answer until that
client is done: the check then runs out of time and says so.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from .errors import (
    LlamaRpcHandshakeError,
    LlamaRpcUnreachableError,
    LlamaRpcVersionError,
)

HELLO_COMMAND = 14
CAPABILITY_BYTES = 24
HELLO_RESPONSE_BYTES = 4 + CAPABILITY_BYTES
SIZE_FORMAT = "<Q"
DEFAULT_TIMEOUT = 5.0  # seconds, for the connection and for each read of the handshake

Version = tuple[int, int, int]


@dataclass(frozen=True)
class Endpoint:
    """``host:port`` as llama.cpp reads it: everything before the first ``:`` is the host, the
    rest the port (so an IPv6 literal cannot be written; use a host name)."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_endpoint(text: object) -> Endpoint:
    """The endpoint ``text`` names; ValueError (TypeError for a non-string) if llama.cpp could
    not read it (llama.cpp aborts the process on an endpoint it cannot parse)."""
    if not isinstance(text, str):
        raise TypeError(f"an RPC endpoint is a 'host:port' string, not {type(text).__name__}")
    host, colon, port = text.partition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"an RPC endpoint is 'host:port' with a port from 1 to 65535: {text!r}")
    return Endpoint(host, int(port))


def _read_exactly(conn: socket.socket, size: int, endpoint: Endpoint, timeout: float) -> bytes:
    data = b""
    while len(data) < size:
        try:
            chunk = conn.recv(size - len(data))
        except TimeoutError as exc:
            raise LlamaRpcHandshakeError(
                str(endpoint),
                f"no answer to the RPC handshake within {timeout:g} s (a ggml-rpc server serves "
                "one client at a time: is another client using it?)",
            ) from exc
        except OSError as exc:
            raise LlamaRpcHandshakeError(
                str(endpoint), f"the connection failed during the handshake ({exc})"
            ) from exc
        if not chunk:
            raise LlamaRpcHandshakeError(
                str(endpoint),
                "the server closed the connection during the RPC handshake (a server of another "
                "protocol version, which expects another handshake, does that; see its log)",
            )
        data += chunk
    return data


def check_server(endpoint: Endpoint, client: Version, timeout: float = DEFAULT_TIMEOUT) -> Version:
    """Connect to ``endpoint``, speak the RPC handshake and return the server's protocol version
    when llama.cpp, speaking ``client``, would accept it (same major, minor not newer); else raise
    :class:`LlamaRpcUnreachableError`, :class:`LlamaRpcHandshakeError` or
    :class:`LlamaRpcVersionError`. The connection is closed before returning."""
    try:
        conn = socket.create_connection((endpoint.host, endpoint.port), timeout=timeout)
    except OSError as exc:
        why = "no answer in time" if isinstance(exc, TimeoutError) else str(exc)
        raise LlamaRpcUnreachableError(str(endpoint), f"cannot connect ({why})") from exc
    with conn:
        hello = bytes([HELLO_COMMAND]) + struct.pack(SIZE_FORMAT, CAPABILITY_BYTES)
        try:
            conn.sendall(hello + bytes(CAPABILITY_BYTES))
        except OSError as exc:
            raise LlamaRpcHandshakeError(
                str(endpoint), f"the connection failed during the handshake ({exc})"
            ) from exc
        (size,) = struct.unpack(SIZE_FORMAT, _read_exactly(conn, 8, endpoint, timeout))
        if size != HELLO_RESPONSE_BYTES:
            raise LlamaRpcHandshakeError(
                str(endpoint),
                f"the answer to the RPC handshake is {size} bytes, not {HELLO_RESPONSE_BYTES}: "
                "not a ggml-rpc server of a protocol these libraries know",
            )
        answer = _read_exactly(conn, HELLO_RESPONSE_BYTES, endpoint, timeout)
    server: Version = (answer[0], answer[1], answer[2])
    if server[0] != client[0] or server[1] > client[1]:
        raise LlamaRpcVersionError(str(endpoint), server, client)
    return server
