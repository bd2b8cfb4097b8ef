"""Which functions each built library must export: from the generated bindings' ABI manifest, or,
until the bindings exist, what the installed llama.h, llama_mtp.h, libmtmd's headers and
ggml-rpc.h declare (read by libclang)."""

from __future__ import annotations

import json
from pathlib import Path

from generator.native.build import BuildResult
from generator.verify.symbols_gate import STRICT_LIBRARIES
from tests.native.headers import read_declarations
from tests.repo import REPO_ROOT

MANIFEST = Path("generated") / "llama_bindings" / "abi_manifest.json"


def manifest_path() -> Path:
    return REPO_ROOT / MANIFEST


def expected_functions(
    build: BuildResult, scratch: Path, manifest: Path | None = None
) -> tuple[dict[str, set[str]], str]:
    """{library: function names} and where the list came from."""
    path = manifest if manifest is not None else manifest_path()
    by_library: dict[str, set[str]] = {}
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        for fn in data["functions"]:
            # llama.h, the wrapper, libmtmd, libggml-rpc (generator/verify/symbols_gate.py: ggml)
            if fn["library"] in STRICT_LIBRARIES and fn.get("bound", True):
                by_library.setdefault(fn["library"], set()).add(fn["name"])
        return by_library, str(MANIFEST) if manifest is None else str(path)
    headers = ["llama.h"] + (["llama_mtp.h"] if build.mtp.supported else [])
    libraries = {"llama.h": "llama", "llama_mtp.h": "llama_mtp"}
    if (build.include_dir / "mtmd.h").is_file():  # installed when the build made libmtmd
        headers += ["mtmd.h", "mtmd-helper.h"]
        libraries.update({"mtmd.h": "mtmd", "mtmd-helper.h": "mtmd"})
    if build.info.get("rpc_protocol"):  # the build's parse bound ggml-rpc.h (every build has RPC)
        headers.append("ggml-rpc.h")
        libraries["ggml-rpc.h"] = "ggml_rpc"
    for header in headers:
        decls = read_declarations(build.include_dir / header, [build.include_dir], scratch)
        for name, source in decls.functions.items():
            # Only what these headers themselves declare: the ggml headers they include declare
            # a few functions no library defines (ggml_threadpool_get_n_threads in b11312),
            # which the bindings generator decides about, not this test.
            if source in libraries:
                by_library.setdefault(libraries[source], set()).add(name)
    return by_library, "headers " + ", ".join(headers)
