"""Smoke driver: runs under the TARGET platform's Python (natively, under qemu or wine).

Uses the standard library, cffi and the generated ``llama_bindings`` package only (no numpy, no
``generator`` imports). Reads a JSON plan (argument 1), generates greedily with and without MTP on
each model of the plan, and prints one JSON line with the results as the last line of stdout.

Plan: ``{"lib_dir": str, "max_tokens": int, "n_ctx": int, "draft_token_max": int,
"n_gpu_layers": int (optional, 0), "models": [{"name": str, "path": str, "prompt": [int] | str,
"expect_unsupported": bool}], "strategies": {"path": str, "prompt": [int], "max_tokens": int,
"draft_token_max": int, "runs": [{"name": str, "strategies": [str], "draft": str | null}]}
(optional), "media": {"path": str, "projector": str, "image": str, "prompt": str,
"max_tokens": int, "n_ctx": int} (optional)}``: the strategies part generates greedily on one
model without speculation, then with each run's strategies (``draft``: the draft model's path);
the media part generates after an image (through the model's projector, libmtmd) without and
with draft-mtp; the RPC part (``"rpc": {"path", "prompt", "max_tokens", "n_ctx",
"draft_token_max", "n_gpu_layers", "runs": [{"name", "strategies", "draft"}], "servers":
[endpoint], "refuse": {name: endpoint}}``, optional) generates each run with the target local and
split over the servers, and loads onto each
endpoint to refuse; with ``"only": "rpc-lost"`` the driver only generates split over the servers
and kills the worker ``rpc.kill_pid`` after the first token (llama.cpp then ends the process).
The result names the compute devices ggml sees.
"""

from __future__ import annotations

import importlib
import json
import platform
import sys
import traceback
from pathlib import Path
from typing import Any


def _generate(
    runtime: Any,
    libs: Any,
    path: str,
    prompt: Any,
    plan: dict[str, Any],
    spec: Any,
    max_tokens: int,
) -> dict[str, Any]:
    layers = int(plan.get("n_gpu_layers", 0))
    load_mtp = runtime.SpeculativeMode.DRAFT_MTP in spec.kinds
    # verbose: llama.cpp's log on stderr, where the host reads the offload lines
    with runtime.Model(path, load_mtp=load_mtp, libs=libs, n_gpu_layers=layers, verbose=True) as m:
        with runtime.Context(m, n_ctx=int(plan["n_ctx"]), speculative=spec) as ctx:
            streamed: list[int] = []
            result = ctx.generate(
                prompt,
                max_tokens=max_tokens,
                on_token=lambda token, _piece: streamed.append(token),
            )
    return {
        "tokens": list(result.tokens),
        "streamed_in_order": streamed == list(result.tokens),
        "finish_reason": str(result.finish_reason.value),
        "metrics": result.metrics.as_dict(),
    }


def _mtp_run(
    runtime: Any, libs: Any, path: str, prompt: Any, plan: dict[str, Any], mtp: bool
) -> dict[str, Any]:
    spec = runtime.SpeculativeDecoding(
        runtime.SpeculativeMode.DRAFT_MTP if mtp else runtime.SpeculativeMode.NONE,
        draft_token_max=int(plan["draft_token_max"]),
    )
    return _generate(runtime, libs, path, prompt, plan, spec, int(plan["max_tokens"]))


def _strategy_run(
    runtime: Any, libs: Any, part: dict[str, Any], run: dict[str, Any] | None, plan: dict[str, Any]
) -> dict[str, Any]:
    """One generation of the strategies part: ``run`` None is the plain reference."""
    kinds = tuple(run["strategies"]) if run else ()
    draft = None
    if run and run.get("draft"):
        layers = int(plan.get("n_gpu_layers", 0))
        draft = runtime.Model(run["draft"], libs=libs, n_gpu_layers=layers, verbose=True)
    try:
        spec = runtime.SpeculativeDecoding(
            strategies=kinds, draft_model=draft, draft_token_max=int(part["draft_token_max"])
        )
        result = _generate(
            runtime, libs, part["path"], part["prompt"], plan, spec, int(part["max_tokens"])
        )
    finally:
        if draft is not None:
            draft.close()
    return {"name": run["name"] if run else "plain", **result}


def _not_in_release(libs: Any, kind: str) -> bool:
    """Whether the wrapper refuses strategy ``kind`` as not in this llama.cpp release (its status,
    by the generated constants)."""
    constants: Any = importlib.import_module("llama_bindings.constants")
    wrapper = libs.llama_mtp
    if wrapper is None:
        return False
    value = constants.MTP_STRATEGY_TYPES[constants.SpeculativeMode(kind)]
    status = wrapper.llama_mtp_strategy_supported(value)
    return bool(status == constants.LLAMA_MTP_STATUS_NOT_IN_RELEASE)


def _strategies(runtime: Any, libs: Any, plan: dict[str, Any]) -> dict[str, Any]:
    part = plan["strategies"]
    reference = _strategy_run(runtime, libs, part, None, plan)
    runs = []
    for run in part["runs"]:
        absent = {
            kind: reason
            for kind in run["strategies"]
            if (reason := runtime.strategy_support(kind, libs)) is not None
        }
        if absent:  # the host decides whether that is a release without it, or a failure
            lacked = all(_not_in_release(libs, kind) for kind in absent)
            runs.append(
                {
                    "name": run["name"],
                    "absent": "; ".join(absent.values()),
                    "lacked_by_release": lacked,
                }
            )
            continue
        try:
            runs.append(_strategy_run(runtime, libs, part, run, plan))
        except runtime.LlamaUnsupportedError as exc:
            runs.append({"name": run["name"], "unexpected_error": exc.reason})
    return {"reference": reference, "runs": runs}


def _media_run(
    runtime: Any, libs: Any, part: dict[str, Any], plan: dict[str, Any], mtp: bool
) -> dict[str, Any]:
    """One greedy generation after the media part's image, with draft-mtp or without."""
    mode = runtime.SpeculativeMode.DRAFT_MTP if mtp else runtime.SpeculativeMode.NONE
    spec = runtime.SpeculativeDecoding(mode, draft_token_max=int(plan["draft_token_max"]))
    layers = int(plan.get("n_gpu_layers", 0))
    try:
        with runtime.Model(
            part["path"], load_mtp=mtp, libs=libs, n_gpu_layers=layers, verbose=True
        ) as model:
            projector = model.load_projector(part["projector"], warmup=False)
            prompt = projector.tokenize(part["prompt"], [part["image"]])
            (span,) = prompt.spans.values()
            with runtime.Context(model, n_ctx=int(part["n_ctx"]), speculative=spec) as ctx:
                result = ctx.generate(prompt, max_tokens=int(part["max_tokens"]))
    except runtime.LlamaUnsupportedError as exc:
        return {"refused": exc.reason}
    return {
        "tokens": list(result.tokens),
        "metrics": result.metrics.as_dict(),
        "image_rows": span.n_tokens,
        "image_positions": span.n_pos,
    }


def _media(runtime: Any, libs: Any, plan: dict[str, Any]) -> dict[str, Any]:
    """The media part: an image through the model's projector (libmtmd), then greedy
    generation without and with draft-mtp; whether the wrapper mirrors media rows."""
    about: Any = importlib.import_module("llama_bindings._about")
    if not libs.mtmd:  # expected: the bindings declare it, so its library must be there
        return {"absent": libs.mtmd.reason, "expected": not about.MTMD_ABSENT}
    try:
        libs.ffi.typeof("struct mtmd_helper_embd_batch")
    except libs.ffi.error:
        why = "this libmtmd's helper API has no post-decode callback (mtmd_helper_embd_batch)"
        return {"absent": why, "expected": False}
    part = plan["media"]
    out: dict[str, Any] = {"plain": _media_run(runtime, libs, part, plan, False)}
    wrapper = libs.llama_mtp
    supported = libs.ffi.new("int32_t *")
    if wrapper is not None and hasattr(wrapper, "llama_mtp_embd_supported"):
        wrapper.llama_mtp_embd_supported(supported)
    out["embd_supported"] = bool(supported[0])
    out["mtp"] = _media_run(runtime, libs, part, plan, True)
    return out


def _rpc_generate(
    runtime: Any, libs: Any, part: dict[str, Any], run: dict[str, Any], servers: list[str] | None
) -> list[int]:
    """One greedy generation of the RPC part: ``run``'s strategies (none: plain; its draft model
    local), the target split over ``servers`` (None: local)."""
    split: dict[str, Any] = {}
    if servers is not None:
        split = {"rpc_servers": servers, "n_gpu_layers": int(part["n_gpu_layers"])}
        split["tensor_split"] = [1.0] * len(servers)
    draft = runtime.Model(run["draft"], libs=libs, verbose=True) if run.get("draft") else None
    try:
        spec = runtime.SpeculativeDecoding(
            strategies=tuple(run["strategies"]),
            draft_model=draft,
            draft_token_max=int(part["draft_token_max"]),
        )
        load_mtp = runtime.SpeculativeMode.DRAFT_MTP in spec.kinds
        with runtime.Model(part["path"], load_mtp=load_mtp, libs=libs, verbose=True, **split) as m:
            with runtime.Context(m, n_ctx=int(part["n_ctx"]), speculative=spec) as ctx:
                return list(ctx.generate(part["prompt"], max_tokens=int(part["max_tokens"])).tokens)
    finally:
        if draft is not None:
            draft.close()


def _rpc_refusal(runtime: Any, libs: Any, part: dict[str, Any], server: str) -> dict[str, str]:
    """What loading the part's model onto ``server`` raises (a typed error is expected)."""
    try:
        with runtime.Model(part["path"], libs=libs, rpc_servers=[server], n_gpu_layers=1):
            pass
    except Exception as exc:  # reported; the host checks the type
        return {"error_type": type(exc).__name__, "reason": str(exc)}
    return {"error_type": "", "reason": "loaded"}


def _rpc(runtime: Any, libs: Any, plan: dict[str, Any]) -> dict[str, Any]:
    """The RPC part: greedy generations with the target local, then split over this machine and
    the part's servers (workers from the same build), plain, with draft-mtp and with draft-simple;
    the devices the servers add; and the typed refusals of a port where nothing listens and of a
    server of another protocol version."""
    if not libs.ggml_rpc:
        return {"absent": libs.ggml_rpc.reason}
    part = plan["rpc"]
    servers = list(part["servers"])
    out: dict[str, Any] = {"runs": {}}
    for run in part["runs"]:
        out["runs"][run["name"]] = {
            "local": _rpc_generate(runtime, libs, part, run, None),
            "split": _rpc_generate(runtime, libs, part, run, servers),
        }
    listed = runtime.list_devices(libs, rpc_servers=servers)
    out["devices"] = [
        {"name": d.name, "endpoint": d.endpoint, "memory_total": d.memory_total} for d in listed
    ]
    out["refusals"] = {
        name: _rpc_refusal(runtime, libs, part, server) for name, server in part["refuse"].items()
    }
    return out


def _rpc_lost(runtime: Any, libs: Any, plan: dict[str, Any]) -> dict[str, Any]:
    """A server stopped mid-generation: after the first token, the worker whose process id the
    part names is killed; llama.cpp is expected to end this process (its GGML_ABORT), so a
    result printed here means it did not."""
    import os
    import signal

    part = plan["rpc"]
    servers = list(part["servers"])
    split = {"rpc_servers": servers, "n_gpu_layers": int(part["n_gpu_layers"])}
    with runtime.Model(part["path"], libs=libs, verbose=True, **split) as model:
        with runtime.Context(model, n_ctx=int(part["n_ctx"])) as ctx:

            def stop_worker(_token: int, _piece: str) -> None:
                if part.get("kill_pid"):
                    os.kill(int(part.pop("kill_pid")), signal.SIGKILL)

            result = ctx.generate(part["prompt"], max_tokens=8, on_token=stop_worker)
    return {"survived": True, "tokens": list(result.tokens)}


def _unsupported(runtime: Any, libs: Any, path: str, plan: dict[str, Any]) -> dict[str, Any]:
    spec = runtime.SpeculativeDecoding(runtime.SpeculativeMode.DRAFT_MTP)
    layers = int(plan.get("n_gpu_layers", 0))
    try:
        with runtime.Model(path, load_mtp=True, libs=libs, n_gpu_layers=layers) as model:
            with runtime.Context(model, n_ctx=256, speculative=spec):
                pass
    except runtime.LlamaUnsupportedError as exc:
        return {"error_type": type(exc).__name__, "reason": exc.reason}
    except Exception as exc:  # reported, and the host fails the check
        return {"error_type": type(exc).__name__, "reason": str(exc)}
    return {"error_type": None, "reason": ""}


def _devices(libs: Any) -> list[dict[str, str]]:
    """The devices ggml's backends offer (name, description, type)."""
    ggml, ffi = libs.ggml, libs.ffi
    types = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel"}
    found = []
    for i in range(int(ggml.ggml_backend_dev_count())):
        dev = ggml.ggml_backend_dev_get(i)
        found.append(
            {
                "name": ffi.string(ggml.ggml_backend_dev_name(dev)).decode(),
                "description": ffi.string(ggml.ggml_backend_dev_description(dev)).decode(),
                "type": types.get(int(ggml.ggml_backend_dev_type(dev)), "other"),
            }
        )
    return found


def main(argv: list[str]) -> int:
    plan = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    out: dict[str, Any] = {"machine": platform.machine(), "python": platform.python_version()}
    try:
        # on PYTHONPATH at run time (the host passes the folder holding the package)
        llama_bindings: Any = importlib.import_module("llama_bindings")
        runtime: Any = importlib.import_module("llama_bindings.runtime")

        libs = llama_bindings.load(plan["lib_dir"])
        if plan.get("only") == "rpc-lost":
            out["rpc_lost"] = _rpc_lost(runtime, libs, plan)
            print(json.dumps(out, sort_keys=True))
            return 0
        out["llama_cpp_tag"] = runtime.LLAMA_CPP_TAG
        out["wrapper"] = libs.llama_mtp is not None
        out["devices"] = _devices(libs)
        models: list[dict[str, Any]] = []
        for entry in plan["models"]:
            result: dict[str, Any] = {"name": entry["name"]}
            prompt = entry["prompt"]
            result["plain"] = _mtp_run(runtime, libs, entry["path"], prompt, plan, False)
            if entry.get("expect_unsupported"):
                result["mtp_error"] = _unsupported(runtime, libs, entry["path"], plan)
            else:
                try:
                    result["mtp"] = _mtp_run(runtime, libs, entry["path"], prompt, plan, True)
                except runtime.LlamaUnsupportedError as exc:
                    result["mtp_unexpected_error"] = exc.reason
            models.append(result)
        out["models"] = models
        if plan.get("strategies"):
            out["strategies"] = _strategies(runtime, libs, plan)
        if plan.get("media"):
            out["media"] = _media(runtime, libs, plan)
        if plan.get("rpc"):
            out["rpc"] = _rpc(runtime, libs, plan)
        out["ok"] = True
    except Exception:
        out["ok"] = False
        out["error"] = traceback.format_exc()
    sys.stdout.flush()
    print(json.dumps(out, sort_keys=True))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
