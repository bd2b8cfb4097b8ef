"""ggml's devices, local and on RPC servers: :func:`list_devices`, and the devices a model with
``rpc_servers`` is loaded onto.

An RPC server is a worker process (``python -m llama_bindings rpc-server``, or llama.cpp's
``rpc-server``) that serves its own devices over TCP; ``ggml_backend_rpc_add_server`` turns each
into a device of this process. llama.cpp ends the process when a server cannot be reached, does
not answer its handshake or speaks another protocol version, so every endpoint is first checked
here (:func:`~llama_bindings.rpc_protocol.check_server`) and refused with a typed
:class:`~llama_bindings.errors.LlamaRpcError`. An endpoint a live model of this process is
already connected to is not checked again: the server serves one client at a time, and that client
is this process.

What the checks cannot cover, and llama.cpp still ends the process on: a server that stops or
drops the connection after the model was loaded (mid-generation included), and one that fails a
request. Run a client that must survive that in a process of its own.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._about import RPC_PROTOCOL_VERSION
from ..errors import LlamaRpcError, LlamaRpcVersionError, LlamaUnsupportedError
from ..loader import Libraries, load
from ..params import MODEL_PARAMS, enum_name, require_field
from ..rpc_protocol import DEFAULT_TIMEOUT, Endpoint, Version, check_server, parse_endpoint


@dataclass(frozen=True)
class Device:
    """One ggml device: ``name`` (``CPU``, ``Vulkan0``, ``RPC0``, ...), ``description`` (an RPC
    device's is its server's endpoint), ``type`` (``cpu``, ``gpu``, ``igpu``, ``accel``),
    ``memory_free`` and ``memory_total`` in bytes as the device reports them, and ``endpoint``:
    the RPC server it lives on, ``""`` for a device of this machine."""

    name: str
    description: str
    type: str
    memory_free: int
    memory_total: int
    endpoint: str = ""


class _Connections:
    """The endpoints the models of this process that are not closed were loaded onto (llama.cpp
    holds a connection to each while their buffers live)."""

    def __init__(self) -> None:
        self._users: weakref.WeakKeyDictionary[Any, tuple[str, ...]] = weakref.WeakKeyDictionary()

    def add(self, user: object, endpoints: Sequence[Endpoint]) -> None:
        """``user`` (a model, with a ``closed`` property) uses ``endpoints``."""
        self._users[user] = tuple(str(e) for e in endpoints)

    def in_use(self, endpoint: Endpoint) -> bool:
        return any(
            str(endpoint) in used
            for user, used in list(self._users.items())
            if not getattr(user, "closed", True)
        )


CONNECTIONS = _Connections()


def rpc_protocol_version() -> Version | None:
    """The RPC protocol version these bindings' ``ggml-rpc.h`` declares, None without RPC."""
    if not RPC_PROTOCOL_VERSION:
        return None
    major, minor, patch = (int(part) for part in RPC_PROTOCOL_VERSION.split("."))
    return (major, minor, patch)


def require_rpc(libs: Libraries) -> Version:
    """The client's protocol version; LlamaUnsupportedError when these bindings or libraries
    have no RPC backend (``reason`` says which)."""
    version = rpc_protocol_version()
    if version is None or not libs.ggml_rpc:
        why = getattr(libs.ggml_rpc, "reason", "") or "these bindings do not carry ggml-rpc.h"
        raise LlamaUnsupportedError(f"RPC servers cannot be used here: {why}")
    return version


def parse_endpoints(values: object) -> tuple[Endpoint, ...]:
    """``rpc_servers``: a sequence of distinct ``host:port`` strings (TypeError or ValueError)."""
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise TypeError(f"rpc_servers must be a sequence of 'host:port' strings, not {values!r}")
    endpoints = tuple(parse_endpoint(value) for value in values)
    if len(set(endpoints)) != len(endpoints):
        raise ValueError(f"rpc_servers names a server twice: {list(values)!r}")
    if not endpoints:
        raise ValueError("rpc_servers is empty: give at least one 'host:port', or leave it None")
    return endpoints


def wait_for_rpc_server(endpoint: str, timeout: float = 30.0) -> Version:
    """Wait until the RPC server at ``endpoint`` (``host:port``) answers the handshake, as a
    worker just started does after a moment, and return its protocol version. Raises the last
    :class:`~llama_bindings.errors.LlamaRpcError` when ``timeout`` seconds pass first (a server of
    another protocol version at once), or LlamaUnsupportedError without RPC in these bindings."""
    version = rpc_protocol_version()
    if version is None:
        raise LlamaUnsupportedError("RPC servers cannot be used here: these bindings do not "
                                    "carry ggml-rpc.h")  # fmt: skip
    where = parse_endpoint(endpoint)
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check_server(where, version, min(DEFAULT_TIMEOUT, timeout))
        except LlamaRpcVersionError:
            raise
        except LlamaRpcError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


def connect_servers(
    libs: Libraries, endpoints: Sequence[Endpoint], timeout: float = DEFAULT_TIMEOUT
) -> list[Any]:
    """Check each endpoint, add it to ggml (``ggml_backend_rpc_add_server``) and return the
    devices it serves, in order of the endpoints, then of each server's devices."""
    version = require_rpc(libs)
    devices: list[Any] = []
    for endpoint in endpoints:
        if not CONNECTIONS.in_use(endpoint):
            check_server(endpoint, version, timeout)
        registry = libs.ggml_rpc.ggml_backend_rpc_add_server(str(endpoint).encode())
        if registry == libs.ffi.NULL:
            raise LlamaRpcError(str(endpoint), "the server reports no devices")
        count = int(libs.ggml.ggml_backend_reg_dev_count(registry))
        devices.extend(libs.ggml.ggml_backend_reg_dev_get(registry, i) for i in range(count))
    return devices


def _type_name(libs: Libraries, device: Any) -> str:
    """``cpu``, ``gpu``, ``igpu``, ``accel``: the device's ``ggml_backend_dev_type``."""
    value = int(libs.ggml.ggml_backend_dev_type(device))
    return enum_name(libs.ffi, "ggml_backend_dev_type", "GGML_BACKEND_DEVICE_TYPE_", value)


def local_offload_devices(libs: Libraries) -> list[Any]:
    """This machine's devices llama.cpp offloads layers to when it chooses by itself: its GPUs,
    else its integrated GPUs (the CPU always holds what is not offloaded)."""
    by_type: dict[str, list[Any]] = {"gpu": [], "igpu": []}
    for index in range(int(libs.ggml.ggml_backend_dev_count())):
        device = libs.ggml.ggml_backend_dev_get(index)
        kind = _type_name(libs, device)
        if kind in by_type:
            by_type[kind].append(device)
    return by_type["gpu"] or by_type["igpu"]


def device_array(libs: Libraries, devices: Sequence[Any]) -> Any:
    """``ggml_backend_dev_t[]``, NULL-terminated, for ``llama_model_params.devices``."""
    require_field(libs.ffi, MODEL_PARAMS, "devices", "rpc_servers")
    return libs.ffi.new("ggml_backend_dev_t[]", [*devices, libs.ffi.NULL])


def describe(libs: Libraries, device: Any, endpoint: str = "") -> Device:
    free = libs.ffi.new("size_t *")
    total = libs.ffi.new("size_t *")
    libs.ggml.ggml_backend_dev_memory(device, free, total)
    return Device(
        name=libs.ffi.string(libs.ggml.ggml_backend_dev_name(device)).decode(),
        description=libs.ffi.string(libs.ggml.ggml_backend_dev_description(device)).decode(),
        type=_type_name(libs, device),
        memory_free=int(free[0]),
        memory_total=int(total[0]),
        endpoint=endpoint,
    )


def list_devices(
    libs: Libraries | None = None,
    *,
    rpc_servers: Sequence[str] = (),
    lib_dir: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> list[Device]:
    """Every device of this machine ggml knows, then those of each RPC server in
    ``rpc_servers`` (each checked first, as ``Model(rpc_servers=...)`` does), with their
    memory."""
    opened = libs if libs is not None else load(lib_dir)
    listed = [
        describe(opened, opened.ggml.ggml_backend_dev_get(index))
        for index in range(int(opened.ggml.ggml_backend_dev_count()))
    ]
    if rpc_servers:
        for endpoint in parse_endpoints(rpc_servers):
            for device in connect_servers(opened, (endpoint,), timeout):
                listed.append(describe(opened, device, str(endpoint)))
    return listed
