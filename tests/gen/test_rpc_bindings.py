"""libggml-rpc in the generated bindings, on real trees: the pinned tree's ``ggml-rpc.h`` bound as
its own library with typed stubs and its protocol version recorded; b9246's older header (another
protocol version) bound the same way; and a tree without the header still generated, with the
reason recorded."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

from generator.emit import PACKAGE_NAME, emit_package
from generator.ir import Interface
from generator.parse.frontend import ParseOptions, parse_interface, tree_source
from generator.platforms import HOST_TARGET
from generator.sources import rpc_api
from generator.sources.licenses import llama_license
from tests.gen.conftest import copy_parsed_parts
from tests.trees import llama_tree

# what the pinned tree's ggml-rpc.h declares (b11549), and b9246's the same seven
RPC_FUNCTIONS = [
    "ggml_backend_is_rpc",
    "ggml_backend_rpc_add_server",
    "ggml_backend_rpc_buffer_type",
    "ggml_backend_rpc_get_device_memory",
    "ggml_backend_rpc_init",
    "ggml_backend_rpc_reg",
    "ggml_backend_rpc_start_server",
]


def _generate(tree: Path, out: Path) -> tuple[Interface, Path]:
    options = ParseOptions(tree, targets=(HOST_TARGET,))
    api = parse_interface(options, tree_source(tree))
    return api, emit_package(api, out, llama_license=llama_license(tree)).package_dir


def _about(package: Path) -> dict[str, Any]:
    return runpy.run_path(str(package / "_about.py"))


def _manifest(package: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((package / "abi_manifest.json").read_text(encoding="utf-8"))
    return data


def _rpc_functions(api: Interface) -> list[str]:
    return sorted(f.name for f in api.functions if f.library == rpc_api.LIBRARY)


def test_the_pinned_tree_binds_ggml_rpc_with_types(tree_pin: Path, tmp_path: Path) -> None:
    api, package = _generate(tree_pin, tmp_path)
    assert _rpc_functions(api) == RPC_FUNCTIONS
    stubs = (package / "api.pyi").read_text(encoding="utf-8")
    rpc_class = stubs[stubs.index("class GgmlRpcLibrary") :]
    assert (
        "def ggml_backend_rpc_start_server(self, endpoint: bytes | CData, cache_dir: bytes | "
        "CData, n_threads: int, n_devices: int, devices: CData, /) -> None:" in rpc_class
    )
    assert "def ggml_backend_is_rpc(self, backend: CData, /) -> bool:" in rpc_class
    # the ggml backend device and registry functions a client needs stay ggml's
    ggml = {f.name: f.library for f in api.functions}
    assert ggml["ggml_backend_dev_count"] == ggml["ggml_backend_reg_get"] == "ggml"
    about = _about(package)
    assert (about["GGML_RPC_API"], about["GGML_RPC_ABSENT"]) == (True, "")
    assert about["RPC_PROTOCOL_VERSION"] == "8.0.0" == _manifest(package)["rpc_protocol"]
    manifest_rpc = [f for f in _manifest(package)["functions"] if f["library"] == "ggml_rpc"]
    assert [f["name"] for f in manifest_rpc] == RPC_FUNCTIONS
    assert all(f["bound"] and f["header"] == "ggml-rpc.h" for f in manifest_rpc)
    report = (package / "GENERATION_REPORT.md").read_text(encoding="utf-8")
    assert "| of them in libggml-rpc (RPC protocol 8.0.0) | 7 |" in report


def test_b9246_binds_its_older_header(tmp_path: Path) -> None:
    api, package = _generate(llama_tree("b9246"), tmp_path)
    assert _rpc_functions(api) == RPC_FUNCTIONS
    assert _about(package)["RPC_PROTOCOL_VERSION"] == "4.0.0"
    assert _manifest(package)["rpc_protocol"] == "4.0.0"


def test_a_tree_without_ggml_rpc_h_is_generated_without_it(tree_pin: Path, tmp_path: Path) -> None:
    tree = copy_parsed_parts(tree_pin, tmp_path / "tree")
    (tree / rpc_api.INCLUDE / rpc_api.HEADER).unlink()
    api, package = _generate(tree, tmp_path / "out")
    assert _rpc_functions(api) == [] and api.constant("RPC_PROTO_MAJOR_VERSION") is None
    reason = dict(api.absent_libraries)["ggml_rpc"]
    assert "has no ggml/include/ggml-rpc.h" in reason
    about = _about(package)
    assert (about["GGML_RPC_API"], about["GGML_RPC_ABSENT"]) == (False, reason)
    assert about["RPC_PROTOCOL_VERSION"] == "" == _manifest(package)["rpc_protocol"]
    report = (package / "GENERATION_REPORT.md").read_text(encoding="utf-8")
    assert f"| ggml_rpc | {reason} |" in report and "libggml-rpc (RPC" not in report
    stubs = (package / "api.pyi").read_text(encoding="utf-8")
    assert "ggml_backend_rpc_init" not in stubs
    assert (package.parent / PACKAGE_NAME) == package
