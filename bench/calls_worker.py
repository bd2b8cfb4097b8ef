"""Foreign-call overhead, one process: ours (the compiled API-mode module ``llama-bindgen build``
puts beside the libraries, and cffi ABI mode, its fallback) vs llama-cpp-python's ctypes bindings
on the same libllama, interleaved.

``python -m bench.calls_worker CONFIG_JSON``; prints one JSON object (ns per call per repeat).
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import sys
import time
import types
from collections.abc import Callable
from typing import Any

BATCH = 512


def _time_ns(fn: Callable[[int], None], n: int) -> float:
    start = time.perf_counter_ns()
    fn(n)
    return (time.perf_counter_ns() - start) / n


def _import_llama_cpp(package_dir: str) -> Any:
    """Import only ``llama_cpp.llama_cpp`` (the ctypes bindings), not the package's high-level
    API and its extra dependencies: a stand-in package object points at the extracted folder."""
    pkg = types.ModuleType("llama_cpp")
    pkg.__path__ = [package_dir]
    sys.modules["llama_cpp"] = pkg
    return importlib.import_module("llama_cpp.llama_cpp")


def _getter_loop(f: Callable[[Any], Any], arg: Any) -> Callable[[int], None]:
    def loop(n: int) -> None:
        for _ in range(n):
            f(arg)

    return loop


def _noarg_loop(f: Callable[[], Any]) -> Callable[[int], None]:
    def loop(n: int) -> None:
        for _ in range(n):
            f()

    return loop


def _empty_loop(n: int) -> None:
    for _ in range(n):
        pass


def _fill_items(batch: Any, tokens: list[int]) -> None:
    """Per-item fill, as llama-cpp-python's LlamaBatch.set_batch and our runtime do it."""
    n = len(tokens)
    batch.n_tokens = n
    for i in range(n):
        batch.token[i] = tokens[i]
        batch.pos[i] = i
        batch.seq_id[i][0] = 0
        batch.n_seq_id[i] = 1
        batch.logits[i] = False
    batch.logits[n - 1] = True


def _fill_slices(batch: Any, tokens: list[int]) -> None:
    """Our runtime's fill (cffi slice assignment for the flat arrays)."""
    from llama_bindings.runtime.session import fill_batch

    fill_batch(batch, tokens, 0)


def _fill_loop(fill: Callable[[Any, list[int]], None], batch: Any) -> Callable[[int], None]:
    tokens = list(range(100, 100 + BATCH))

    def loop(n: int) -> None:
        for _ in range(n):
            fill(batch, tokens)

    return loop


def main(config: dict[str, Any]) -> dict[str, Any]:
    sys.path.insert(0, config["bindings"])
    import llama_bindings

    ours = llama_bindings.load(config["lib_dir"], mode="abi")
    lib, ffi = ours.llama, ours.ffi
    lib.llama_backend_init()
    model_params = lib.llama_model_default_params()
    model = lib.llama_model_load_from_file(config["model"].encode(), model_params)
    if model == ffi.NULL:
        raise SystemExit("could not load the model")
    vocab = lib.llama_model_get_vocab(model)
    address = int(ffi.cast("uintptr_t", vocab))

    os.environ["LLAMA_CPP_LIB_PATH"] = config["lib_dir"]
    lcp = _import_llama_cpp(config["llama_cpp_package"])
    c_vocab = ctypes.c_void_p(address)

    impls: dict[str, dict[str, Callable[[int], None]]] = {}
    ours_batch = lib.llama_batch_init(BATCH, 0, 1)
    impls["cffi_abi"] = {
        "llama_vocab_n_tokens": _getter_loop(lib.llama_vocab_n_tokens, vocab),
        "llama_context_default_params": _noarg_loop(lib.llama_context_default_params),
        "batch_fill_512": _fill_loop(_fill_items, ours_batch),
        "batch_fill_512_slices": _fill_loop(_fill_slices, ours_batch),
    }
    lcp_batch = lcp.llama_batch_init(BATCH, 0, 1)
    impls["ctypes"] = {
        "llama_vocab_n_tokens": _getter_loop(lcp.llama_vocab_n_tokens, c_vocab),
        "llama_context_default_params": _noarg_loop(lcp.llama_context_default_params),
        "batch_fill_512": _fill_loop(_fill_items, lcp_batch),
    }
    api_batch = None
    if config.get("api_mode"):
        api = llama_bindings.load(config["lib_dir"], mode="api")
        api_vocab = api.ffi.cast("struct llama_vocab *", address)
        api_batch = api.llama.llama_batch_init(BATCH, 0, 1)
        impls["cffi_api"] = {
            "llama_vocab_n_tokens": _getter_loop(api.llama.llama_vocab_n_tokens, api_vocab),
            "llama_context_default_params": _noarg_loop(api.llama.llama_context_default_params),
            "batch_fill_512": _fill_loop(_fill_items, api_batch),
            "batch_fill_512_slices": _fill_loop(_fill_slices, api_batch),
        }

    # sanity: all see the same library state
    expected = int(lib.llama_vocab_n_tokens(vocab))
    assert int(lcp.llama_vocab_n_tokens(c_vocab)) == expected

    calls_n = int(config["calls"])
    fills_n = int(config["fills"])
    results: dict[str, dict[str, list[float]]] = {k: {c: [] for c in v} for k, v in impls.items()}
    empty: list[float] = []
    for _ in range(int(config["repeats"])):
        empty.append(_time_ns(_empty_loop, calls_n))
        for impl, cases in impls.items():
            for case, loop in cases.items():
                n = fills_n if case.startswith("batch") else calls_n
                results[impl][case].append(_time_ns(loop, n))
    lib.llama_batch_free(ours_batch)
    lcp.llama_batch_free(lcp_batch)
    if api_batch is not None:
        api.llama.llama_batch_free(api_batch)
    lib.llama_model_free(model)
    return {"ns_per_iteration": results, "empty_loop_ns": empty, "n_vocab": expected}


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(json.dumps(main(json.load(f))))
