"""``python -m llama_bindings rpc-server`` (``llama-bindings rpc-server`` from a wheel): serve
this machine's devices to models on other machines over llama.cpp's RPC protocol.

It calls ``ggml_backend_rpc_start_server`` of the libraries :func:`~llama_bindings.load` opens,
which serves one client at a time, forever: the worker is a process of its own, stopped with
Ctrl-C or SIGTERM. It listens on 127.0.0.1 unless told otherwise; any other address needs
``--allow-remote`` and prints a warning, since the protocol has no authentication and no
encryption and a client may make it allocate memory and run graphs at will. Reach a worker on
another machine through an SSH tunnel (``ssh -N -L 50052:127.0.0.1:50052 worker-host``, then
``rpc_servers=["127.0.0.1:50052"]``) or a VPN such as WireGuard, never an open network.

The devices served: those named with ``--device`` (names as :func:`list_devices` gives them),
else this machine's GPUs, else its CPU (llama.cpp's ``rpc-server`` chooses the same way).
``--cache DIR`` keeps large tensors a client sends in ``DIR``, so that loading the same model again
sends only their hashes.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import signal
import socket
import sys
from collections.abc import Sequence
from typing import Any

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 50052  # llama.cpp's rpc-server's default
WARNING = (
    "WARNING: serving on {host}, not on the loopback address: llama.cpp's RPC protocol has no "
    "authentication and no encryption, and any client that reaches this port can allocate "
    "memory and run computations here. Never expose it to an open network; prefer a loopback "
    "worker reached through an SSH tunnel or a VPN (WireGuard)."
)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="llama-bindings rpc-server",
        description="Serve this machine's devices to llama.cpp models elsewhere (ggml RPC).",
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help="address to listen on")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="TCP port to listen on")
    parser.add_argument(
        "--threads", type=int, default=max(1, (os.cpu_count() or 2) // 2),
        help="threads of the CPU device (default: half the cores)",
    )  # fmt: skip
    parser.add_argument("--cache", default=None, help="folder to cache large tensors in")
    parser.add_argument(
        "--device", action="append", default=[], help="a device to serve (repeatable)"
    )
    parser.add_argument(
        "--allow-remote", action="store_true",
        help="allow an address other than loopback (the protocol is unauthenticated)",
    )  # fmt: skip
    parser.add_argument("--lib-dir", default=None, help="folder of the native libraries")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"--port must be from 1 to 65535, not {args.port}")
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, not {args.threads}")
    if ":" in args.host:
        parser.error("--host cannot hold ':' (llama.cpp reads host:port): use a host name")
    if not is_loopback(args.host) and not args.allow_remote:
        parser.error(
            f"--host {args.host} is not a loopback address: the RPC protocol is unauthenticated, "
            "so serving beyond this machine needs --allow-remote (better: a loopback worker "
            "reached through an SSH tunnel or a VPN)"
        )
    return args


def _served_devices(libs: Any, names: Sequence[str]) -> list[Any]:
    from .runtime.devices import describe, local_offload_devices

    every = [libs.ggml.ggml_backend_dev_get(i) for i in range(libs.ggml.ggml_backend_dev_count())]
    if names:
        by_name = {describe(libs, device).name: device for device in every}
        unknown = [name for name in names if name not in by_name]
        if unknown:
            known = ", ".join(sorted(by_name))
            raise SystemExit(f"rpc-server: no device {', '.join(unknown)} here (devices: {known})")
        return [by_name[name] for name in names]
    gpus = local_offload_devices(libs)
    if gpus:
        return gpus
    return [d for d in every if describe(libs, d).type == "cpu"][:1]


def _port_is_free(host: str, port: int) -> str:
    """ "" when ``host:port`` can be listened on, else why not."""
    try:
        with socket.create_server((host, port)):
            return ""
    except OSError as exc:
        return str(exc)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from .loader import load
    from .runtime.devices import describe, require_rpc

    libs = load(args.lib_dir)
    version = require_rpc(libs)
    devices = _served_devices(libs, args.device)
    why = _port_is_free(args.host, args.port)
    if why:
        print(f"rpc-server: cannot listen on {args.host}:{args.port}: {why}", file=sys.stderr)
        return 1
    if not is_loopback(args.host):
        print(WARNING.format(host=args.host), file=sys.stderr)
    if args.cache is not None:
        os.makedirs(args.cache, exist_ok=True)
    names = ", ".join(describe(libs, device).name for device in devices)
    print(
        f"llama-bindings rpc-server: serving {names} on {args.host}:{args.port}, RPC protocol "
        f"{'.'.join(map(str, version))}; Ctrl-C stops it",
        flush=True,
    )
    # the server loop runs in C and never returns to Python: let the signals end the process
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    array = libs.ffi.new("ggml_backend_dev_t[]", devices)
    cache = os.fsencode(args.cache) if args.cache is not None else libs.ffi.NULL
    endpoint = f"{args.host}:{args.port}".encode()
    libs.ggml_rpc.ggml_backend_rpc_start_server(endpoint, cache, args.threads, len(devices), array)
    print("rpc-server: the server stopped (llama.cpp's reason is above)", file=sys.stderr)
    return 1
