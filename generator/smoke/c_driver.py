"""The smoke test's C driver (``mtp_smoke.c``), for platforms with no Python here (Windows under
wine): compiled by the toolchain that built the libraries, run once per model where the platform
registry says, its JSON lines gathered into the shape ``driver.py`` prints so the host's checks
are the same for both drivers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from generator.native.host import host_toolchain
from generator.platforms import Execution, Platform
from generator.progress import ticking
from generator.smoke import driver_result
from generator.sources import mtmd_api, rpc_api

MTMD_STEM = mtmd_api.LIBRARY

SOURCE = Path(__file__).resolve().with_name("mtp_smoke.c")
RPC_SOURCE = SOURCE.with_name("mtp_smoke_rpc.c")  # with mtp_smoke_rpc.h: the RPC part
N_THREADS = 2
RUN_TIMEOUT_S = 1800


def media_absent(plat: Platform, lib_dir: Path) -> str | None:
    """Why the driver's media part cannot be built for this build (None: it can): no libmtmd
    in it, or a libmtmd whose helper API predates the post-decode callback."""
    if not (lib_dir / plat.library_file(MTMD_STEM)).is_file():
        return "the build has no libmtmd"
    helper = lib_dir.parent / "include" / "mtmd-helper.h"
    text = helper.read_text(encoding="utf-8", errors="replace") if helper.is_file() else ""
    if "mtmd_helper_embd_batch" not in text:
        return "this libmtmd's helper API has no post-decode callback (mtmd_helper_embd_batch)"
    return None


def rpc_absent(plat: Platform, lib_dir: Path) -> str | None:
    """Why the driver's RPC part cannot be built for this build (None: it can)."""
    if not (lib_dir / plat.library_file(rpc_api.STEM)).is_file():
        return "the build has no libggml-rpc"
    return None


def _compile(plat: Platform, lib_dir: Path, out: Path) -> tuple[Path | None, str]:
    """Compile the driver into ``out`` with the libraries' DLLs or shared objects beside it
    (with the media part where the build's libmtmd allows)."""
    out.mkdir(parents=True, exist_ok=True)
    exe = out / ("mtp_smoke.exe" if plat.binary_format == "pe" else "mtp_smoke")
    include = lib_dir.parent / "include"
    stems: tuple[str, ...] = ("llama_mtp", "llama", "ggml", "ggml-base")  # ggml_time_us
    media = media_absent(plat, lib_dir) is None
    if media:
        stems = (MTMD_STEM, *stems)
    rpc = rpc_absent(plat, lib_dir) is None
    if rpc:
        stems = (rpc_api.STEM, *stems)
    argv = [
        host_toolchain(plat).c_compiler, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror",
        *(["-DLLAMA_SMOKE_MTMD"] if media else []), *(["-DLLAMA_SMOKE_RPC"] if rpc else []),
        f"-I{include}", str(SOURCE), *([str(RPC_SOURCE)] if rpc else []), "-o", str(exe),
        *link_arguments(plat, lib_dir, stems),
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return None, f"compiling {SOURCE.name} failed:\n$ {' '.join(argv)}\n{proc.stderr[-3000:]}"
    place_libraries_beside(plat, lib_dir, out)
    return exe, ""


def link_arguments(plat: Platform, lib_dir: Path, stems: tuple[str, ...]) -> list[str]:
    """Linker arguments for a program using the libraries ``stems`` of a build in ``lib_dir``."""
    if plat.binary_format == "pe":  # MinGW links against a DLL directly
        return [str(lib_dir / plat.library_file(stem)) for stem in stems]
    return [f"-L{lib_dir}", *(f"-l{stem}" for stem in stems), f"-Wl,-rpath,{lib_dir}"]


def place_libraries_beside(plat: Platform, lib_dir: Path, folder: Path) -> None:
    """Where the platform finds libraries only beside the program (Windows), copy them there."""
    if plat.binary_format == "pe":
        for dll in sorted(lib_dir.glob("*.dll")):
            shutil.copy2(dll, folder / dll.name)


def _run_model(
    run: Execution,
    exe: Path,
    entry: dict[str, Any],
    plan: dict[str, Any],
    log: Path,
    strategies: tuple[list[str], str | None] | None = None,
) -> tuple[dict[str, Any] | None, str]:
    prompt = entry["prompt"]
    if not isinstance(prompt, list):
        return None, "the C driver takes token-id prompts only (a real model needs the Python one)"
    argv = [
        run.program_path(Path(entry["path"])), str(plan["max_tokens"]),
        str(plan["n_ctx"]), str(plan["draft_token_max"]), str(N_THREADS),
        "1" if entry["expect_unsupported"] else "0", ",".join(str(int(t)) for t in prompt),
    ]  # fmt: skip
    if strategies is not None:
        kinds, draft = strategies
        argv += [",".join(kinds), run.program_path(Path(draft)) if draft else "-"]
    return _run_driver(run, exe, argv, log, entry["name"])


def run_program(
    run: Execution, exe: Path, args: list[str], log: Path, what: str, timeout: float = RUN_TIMEOUT_S
) -> subprocess.CompletedProcess[str] | None:
    """``exe args`` the platform's way (``run``'s prefix first), logged; None when it ran past
    ``timeout``."""
    argv = [*run.prefix, str(exe), *args]
    with ticking(f"smoke: the C driver runs {run.how} ({what})"):
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, check=False, timeout=timeout,
                env={**os.environ, **run.env}, cwd=exe.parent,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            proc = None
    with log.open("a", encoding="utf-8") as fh:
        if proc is None:
            fh.write(f"$ {' '.join(argv)}\nno end within {timeout} s\n")
        else:
            fh.write(f"$ {' '.join(argv)}\nexit {proc.returncode}\n{proc.stdout}{proc.stderr}\n")
    return proc


def _run_driver(
    run: Execution, exe: Path, args: list[str], log: Path, what: str
) -> tuple[dict[str, Any] | None, str]:
    """One driver run, logged; its result."""
    proc = run_program(run, exe, args, log, what)
    if proc is None:
        return None, f"{what}: no end within {RUN_TIMEOUT_S} s"
    return driver_result(proc, what)


def run_c_driver(
    plat: Platform, run: Execution, plan: dict[str, Any], work: Path
) -> tuple[dict[str, Any] | None, str]:
    """Results in ``driver.py``'s shape (or None and why), from one driver run per model."""
    lib_dir = Path(plan["lib_dir"])
    exe, problem = _compile(plat, lib_dir, work / "c-driver")
    if exe is None:
        return None, problem
    log = work / "c-driver.log"
    log.write_text("", encoding="utf-8")
    out: dict[str, Any] = {
        "ok": True,
        "wrapper": (lib_dir / plat.library_file("llama_mtp")).is_file(),
        "models": [],
    }
    for entry in plan["models"]:
        data, diagnostic = _run_model(run, exe, entry, plan, log)
        if data is None:
            return None, diagnostic
        if not data.get("ok"):
            return {"ok": False, "error": f"{entry['name']}: {data.get('error', '')}"}, diagnostic
        out.setdefault("system_info", data.get("system_info", ""))
        result = {k: v for k, v in data.items() if k in ("plain", "mtp", "mtp_error",
                                                         "mtp_unexpected_error")}  # fmt: skip
        out["models"].append({"name": entry["name"], **result})
    if plan.get("strategies"):
        part, problem = _strategies(run, exe, plan, log)
        if part is None:
            return None, problem
        out["strategies"] = part
    if plan.get("media"):
        media, problem = _media(plat, run, exe, plan, log)
        if media is None:
            return None, problem
        out["media"] = media
    if plan.get("rpc"):
        absent = rpc_absent(plat, lib_dir)
        if absent:
            out["rpc"] = {"absent": absent}
        else:
            from generator.smoke.c_rpc import run_rpc_part

            out["rpc"] = run_rpc_part(run, exe, plan, work, log)
    return out, ""


def _media(
    plat: Platform, run: Execution, exe: Path, plan: dict[str, Any], log: Path
) -> tuple[dict[str, Any] | None, str]:
    """The media part in driver.py's shape, from one ``--media`` run of the driver."""
    lib_dir = Path(plan["lib_dir"])
    absent = media_absent(plat, lib_dir)
    if absent is not None:  # expected: the build installed libmtmd's headers, not the library
        lib = lib_dir / plat.library_file(MTMD_STEM)
        expected = (lib_dir.parent / "include" / "mtmd.h").is_file() and not lib.is_file()
        return {"absent": absent, "expected": expected}, ""
    part = plan["media"]
    argv = [
        "--media", run.program_path(Path(part["path"])),
        run.program_path(Path(part["projector"])), run.program_path(Path(part["image"])),
        str(part["max_tokens"]), str(part["n_ctx"]), str(plan["draft_token_max"]),
        str(N_THREADS), part["prompt"],
    ]  # fmt: skip
    data, diagnostic = _run_driver(run, exe, argv, log, "media")
    if data is None or not data.get("ok"):
        error = data.get("error", "") if data else ""
        return None, f"media: {error} {diagnostic}"
    return {k: v for k, v in data.items() if k in ("plain", "mtp", "embd_supported")}, ""


def _strategies(
    run: Execution, exe: Path, plan: dict[str, Any], log: Path
) -> tuple[dict[str, Any] | None, str]:
    """The strategies part in driver.py's shape: one driver run per strategy run (each also
    generates the plain reference, which must be the same every time)."""
    part = plan["strategies"]
    entry = {"name": "strategies", "path": part["path"], "prompt": part["prompt"],
             "expect_unsupported": False}  # fmt: skip
    settings = {
        **plan,
        "max_tokens": part["max_tokens"],
        "draft_token_max": part["draft_token_max"],
    }
    reference: dict[str, Any] | None = None
    runs: list[dict[str, Any]] = []
    for spec in part["runs"]:
        data, diagnostic = _run_model(
            run, exe, entry, settings, log, (spec["strategies"], spec["draft"])
        )
        if data is None:
            return None, diagnostic
        if not data.get("ok"):
            return None, f"{spec['name']}: {data.get('error', '')}"
        if reference is None:
            reference = {"name": "plain", **data["plain"]}
        elif data["plain"]["tokens"] != reference["tokens"]:
            return None, f"{spec['name']}: the plain reference differs between driver runs"
        if "mtp" not in data and data.get("lacked_by_release"):
            # refused with LLAMA_MTP_STATUS_NOT_IN_RELEASE: the host may leave it out
            reason = data.get("mtp_unexpected_error")
            runs.append({"name": spec["name"], "absent": reason, "lacked_by_release": True})
            continue
        if "mtp" not in data:
            runs.append(
                {"name": spec["name"], "unexpected_error": data.get("mtp_unexpected_error")}
            )
            continue
        metrics = {**data["mtp"]["metrics"], "strategies": data.get("strategies", [])}
        runs.append({"name": spec["name"], "tokens": data["mtp"]["tokens"], "metrics": metrics})
    return {"reference": reference, "runs": runs}, ""
