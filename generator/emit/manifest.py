"""The ABI manifest: layouts per target and the symbol list, for symbol tests and the ABI guard."""

from __future__ import annotations

from typing import Any

from generator import __version__
from generator.ir import Interface
from generator.sources import rpc_api


def build_manifest(api: Interface, bound: set[str]) -> dict[str, Any]:
    """``bound`` names the functions the cdef declares (others are listed with ``bound: false``).
    ``rpc_protocol``: the RPC protocol version of the bound ``ggml-rpc.h`` ("" without RPC)."""
    targets: dict[str, Any] = {}
    for target in api.targets:
        structs: dict[str, Any] = {}
        for record in api.records:
            layout = record.layouts.get(target)
            if layout is None:
                continue
            entry = layout.to_json()
            entry["kind"] = record.kind
            structs[record.name] = entry
        enums = {e.name: {"size": e.sizes[target]} for e in api.enums if target in e.sizes}
        targets[target] = {"structs": structs, "enums": enums}
    functions = [
        {
            "name": f.name,
            "library": f.library,
            "header": f.header,
            "bound": f.name in bound,
        }
        for f in sorted(api.functions, key=lambda f: f.name)
        if not f.static
    ]
    return {
        "generator_version": __version__,
        "tag": api.source.tag,
        "commit": api.source.commit,
        "digest": api.source.digest,
        "host_target": api.host_target,
        "rpc_protocol": rpc_api.protocol_version(api),
        "targets": targets,
        "functions": functions,
    }
