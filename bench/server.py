"""Section "server": OpenAI-compatible servers under concurrent chat clients. Ours (``python -m
llama_bindings serve``, slots with continuous batching), llama-cpp-python 0.3.36's server
(``python -m llama_cpp.server``, one ``Llama``, requests one at a time) and llama.cpp's own
``llama-server``, all three on the same b11312 libllama and ggml, with the same threads.

Per repeat every server starts once per mode and serves 1, 4 and 16 concurrent clients in turn
(``bench.server_load``: the official ``openai`` client, one thread per client, each client's chat
requests one after the other, greedy, a fixed ``max_tokens``); the servers run one after the
other, their order alternated per repeat. Modes: plain decoding on Gemma 3 270M (all three),
n-gram speculation (ngram-mod: ours and llama-server) and draft-mtp on the synthetic MTP test
model (ours and llama-server, acceptance per slot), plain decoding on that model
(plain-mtp-model, the baseline speculation must beat) and --deterministic on Gemma.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import venv
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from bench.calls import extract_llama_cpp_package
from bench.stats import Series, log, ratio_series, run_measured
from generator.smoke.rpc_part import free_port

# What llama-cpp-python 0.3.36's server imports beyond its own llama_cpp/ package: its `server`
# extra (without PyYAML: only its --config_file reads YAML) and its dependencies.
PEER_SERVER_REQUIREMENTS = (
    "uvicorn>=0.22.0", "fastapi>=0.100.0", "pydantic-settings>=2.0.1", "sse-starlette>=1.6.1",
    "starlette-context>=0.3.6,<0.4", "numpy>=1.20.0", "typing-extensions>=4.5.0",
    "diskcache>=5.6.1", "jinja2>=2.11.3",
)  # fmt: skip


def llama_server_bin(cache: Path, tree: Path) -> Path:
    """llama.cpp's ``llama-server``, built out of tree from ``tree`` into the cache (cached per
    tree; with ccache where installed). The web UI is left out: its assets are not in the
    fetched trees and the prebuilt ones would be downloaded."""
    build = cache / "bench-llama-server" / tree.name  # one build per tree (tag and digest)
    exe = build / "bin" / "llama-server"
    if exe.is_file():
        return exe.parent
    log(f"building llama-server in {build} (several minutes on 2 cores)")
    launcher = shutil.which("ccache")
    ccache = (
        [f"-DCMAKE_C_COMPILER_LAUNCHER={launcher}", f"-DCMAKE_CXX_COMPILER_LAUNCHER={launcher}"]
        if launcher
        else []
    )
    env = {**os.environ, "CCACHE_DIR": str(cache / "ccache")}
    subprocess.run(
        [
            "cmake", "-S", str(tree), "-B", str(build), "-G", "Ninja",
            "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=ON", "-DLLAMA_BUILD_SERVER=ON",
            "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TESTS=OFF",
            "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_OPENSSL=OFF",
            "-DLLAMA_CURL=OFF", "-DGGML_NATIVE=OFF", *ccache,
        ],
        check=True,
        env=env,
    )  # fmt: skip
    subprocess.run(
        ["cmake", "--build", str(build), "--target", "llama-server", "-j2"], check=True, env=env
    )
    return exe.parent


def peer_server_python(cache: Path) -> Path:
    """The Python of a private venv with llama-cpp-python's server dependencies (cached)."""
    root = cache / "bench-venvs" / "llama-cpp-python-server"
    python = root / "bin" / "python"
    marker = root / "requirements.txt"
    wanted = "\n".join(PEER_SERVER_REQUIREMENTS) + "\n"
    if not (python.is_file() and marker.is_file() and marker.read_text() == wanted):
        log(f"creating {root} for llama-cpp-python's server")
        venv.EnvBuilder(with_pip=True, clear=True).create(root)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *PEER_SERVER_REQUIREMENTS], check=True
        )
        marker.write_text(wanted)
    return python


# The conversations' shared opening: a few facts, then each conversation's first question.
FACTS = (
    "Here are some facts about the Gull Point Lighthouse Museum. It is open from Tuesday to "
    "Sunday, from ten in the morning to five in the afternoon. An adult ticket costs eight pounds, "
    "a child ticket four pounds and a family ticket twenty pounds, sold at the keeper's cottage. "
    "The tower is thirty-one metres high and has one hundred and twelve steps. Dogs on a lead are "
    "welcome in the grounds and the cafe, but not in the tower. The number 14 bus stops at the "
    "gate every hour."
)
QUESTIONS = (
    "When is the museum open?",
    "How much does a family ticket cost?",
    "Can I bring my dog up the tower?",
    "How do I get there by bus?",
    "How many steps does the tower have?",
    "Where do I buy tickets?",
)
N_CONVERSATIONS = 4  # client i has conversation i mod 4: at 16 clients each runs 4 times at once
WARMUP = "Hello"
SIDES = ("ours", "llama-server", "llama-cpp-python")
MODEL_ID = "bench"


def conversations(turns: int) -> list[list[str]]:
    """Conversation k: questions k, k+1, ... (mod 6), the facts before the first."""
    out = []
    for k in range(N_CONVERSATIONS):
        qs = [QUESTIONS[(k + t) % len(QUESTIONS)] for t in range(turns)]
        out.append([f"{FACTS}\n\nAnswer in one sentence: {qs[0]}", *qs[1:]])
    return out


@dataclass(frozen=True)
class Mode:
    """One server configuration for all sides: its model, flags per side, clients."""

    name: str
    model: str  # "gemma" (Gemma 3 270M) or "mtp" (the synthetic MTP test model)
    template: str  # the chat template every side is told to use (the GGUFs have none)
    ours: tuple[str, ...]  # extra flags of `llama_bindings serve`
    llama_server: tuple[str, ...]  # extra flags of llama-server
    peer: bool  # llama-cpp-python runs this mode too
    clients: tuple[int, ...]


MODES = (
    Mode("plain", "gemma", "gemma", (), (), True, (1, 4, 16)),
    Mode("ngram-mod", "gemma", "gemma", ("--speculative", "ngram-mod"),
         ("--spec-type", "ngram-mod"), False, (1, 4, 16)),
    Mode("draft-mtp", "mtp", "chatml", ("--speculative", "draft-mtp"),
         ("--spec-type", "draft-mtp"), False, (1, 4, 16)),
    # plain decoding on the draft-mtp model: what speculation there must beat
    Mode("plain-mtp-model", "mtp", "chatml", (), (), False, (1, 4, 16)),
    # each greedy reply as it is alone: one token per pass, a KV buffer per slot (both sides)
    Mode("deterministic", "gemma", "gemma", ("--deterministic",),
         ("--ubatch-size", "1", "--no-kv-unified"), False, (1, 4, 16)),
)  # fmt: skip


@dataclass(frozen=True)
class Setup:
    repo: Path
    bindings: Path  # the folder holding the llama_bindings package that fits lib_dir
    lib_dir: Path
    models: dict[str, Path]  # "gemma", "mtp"
    llama_server: Path | None  # the folder of llama-server (None: not measured)
    peer_python: Path | None  # the venv Python of llama-cpp-python's server (None: not measured)
    peer_package: Path | None  # the extracted llama_cpp/ package
    threads: int
    max_tokens: int
    turns: int
    ctx_size: int  # cells per slot
    slots: int  # every side's parallel slots (llama-cpp-python: one sequence)
    clients: tuple[int, ...] | None = None  # None: each mode's own
    modes: tuple[str, ...] | None = None  # None: every mode of MODES


def command(setup: Setup, side: str, mode: Mode, port: int) -> tuple[list[str], dict[str, str]]:
    """The argv and extra environment of one side's server for ``mode``."""
    model = str(setup.models[mode.model])
    net = ["--host", "127.0.0.1", "--port", str(port)]
    if side == "ours":
        argv = [
            sys.executable, "-m", "llama_bindings", "serve", "--model", model,
            "--slots", str(setup.slots), "--ctx-size", str(setup.ctx_size),
            "--threads", str(setup.threads), "--chat-template", mode.template,
            "--alias", MODEL_ID, *mode.ours, *net,
        ]  # fmt: skip
        path = f"{setup.bindings}:{setup.repo}"
        return argv, {"LLAMA_BINDGEN_LIB_DIR": str(setup.lib_dir), "PYTHONPATH": path}
    if side == "llama-server":
        assert setup.llama_server is not None
        argv = [
            str(setup.llama_server / "llama-server"), "-m", model, "-np", str(setup.slots),
            "-c", str(setup.slots * setup.ctx_size), "--threads", str(setup.threads),
            # --no-jinja: the name picks llama.cpp's built-in template, as ours does (with Jinja,
            # its default, the name itself would be the template's text)
            "--no-jinja", "--chat-template", mode.template, "--alias", MODEL_ID,
            *mode.llama_server, *net,
        ]  # fmt: skip
        # our libllama and ggml first (its RUNPATH only supplies its own libllama-common)
        return argv, {"LD_LIBRARY_PATH": f"{setup.lib_dir}:{setup.llama_server}"}
    assert setup.peer_python is not None and setup.peer_package is not None
    argv = [
        str(setup.peer_python), "-m", "llama_cpp.server", "--model", model,
        "--n_threads", str(setup.threads), "--n_threads_batch", str(setup.threads),
        "--chat_format", mode.template, "--model_alias", MODEL_ID, *net,
    ]  # fmt: skip
    env = {"PYTHONPATH": str(setup.peer_package.parent), "LLAMA_CPP_LIB_PATH": str(setup.lib_dir)}
    return argv, env


READY_WAIT_S = 180.0


@contextmanager
def started(argv: list[str], env: dict[str, str], log_path: Path) -> Iterator[str]:
    """The server of ``argv`` running, until ``/v1/models`` answers; its base URL. Stopped with
    SIGTERM (killed after 30 s) on the way out."""
    port = argv[argv.index("--port") + 1]
    base = f"http://127.0.0.1:{port}"
    with log_path.open("w") as out:
        process = subprocess.Popen(
            argv, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + READY_WAIT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"{argv[0]} exited ({process.returncode}):\n{log_path.read_text()[-3000:]}"
                )
            try:
                with urllib.request.urlopen(f"{base}/v1/models", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{argv[0]} never answered:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.25)
        yield base
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _available(setup: Setup, side: str, mode: Mode) -> bool:
    if side == "llama-server":
        return setup.llama_server is not None
    if side == "llama-cpp-python":
        return mode.peer and setup.peer_python is not None and setup.peer_package is not None
    return True


def serve_one(setup: Setup, side: str, mode: Mode, work: Path) -> dict[int, dict[str, Any]]:
    """One server start: a warm-up request, then each client count in turn. Clients -> the run's
    figures, replies per conversation, errors and (ours) acceptance per slot."""
    from bench import server_load

    argv, env = command(setup, side, mode, free_port())
    chats = conversations(setup.turns)
    out: dict[int, dict[str, Any]] = {}
    with started(argv, env, work / f"{side}-{mode.name}.log") as base:
        _, errors = server_load.run_clients(base, MODEL_ID, [[WARMUP]], 1, 4)
        if errors:
            raise RuntimeError(f"{side} {mode.name}: the warm-up failed: {errors}")
        for clients in setup.clients or mode.clients:
            before = server_load.scrape(base) if side == "ours" else None
            requests, errors = server_load.run_clients(
                base, MODEL_ID, chats, clients, setup.max_tokens
            )
            slots = (
                server_load.slot_acceptance(before, server_load.scrape(base))
                if before is not None
                else {}
            )
            figures = server_load.run_figures(requests)
            out[clients] = {
                "figures": figures,
                "replies": server_load.replies_by_conversation(requests),
                "errors": errors,
                "slots": {str(k): v for k, v in slots.items()},
            }
            log(
                f"server {mode.name} {side} x{clients}: "
                f"{figures.get('tokens_per_second', float('nan')):.1f} tok/s, p50 "
                f"{figures.get('latency_p50_s', float('nan')):.2f} s, p95 "
                f"{figures.get('latency_p95_s', float('nan')):.2f} s, "
                f"{len(errors)} failed client(s)"
            )
    return out


Runs = dict[str, dict[str, dict[int, list[dict[str, Any]]]]]  # mode -> side -> clients -> repeats


def collect(setup: Setup, repeats: int, work: Path) -> Runs:
    runs: Runs = {}
    for i in range(repeats):
        for mode in [m for m in MODES if setup.modes is None or m.name in setup.modes]:
            log(f"server: repeat {i + 1}/{repeats}, {mode.name}")
            sides = [s for s in SIDES if _available(setup, s, mode)]
            for side in sides if i % 2 == 0 else sides[::-1]:
                for clients, fig in serve_one(setup, side, mode, work).items():
                    runs.setdefault(mode.name, {}).setdefault(side, {}).setdefault(
                        clients, []
                    ).append(fig)
    return runs


def _series(figs: list[dict[str, Any]], key: str, unit: str) -> Series:
    return Series(unit, [float(f["figures"][key]) for f in figs if key in f["figures"]])


def _references(by_clients: dict[int, list[dict[str, Any]]]) -> dict[int, list[str]]:
    """Per conversation, the replies of its first client at the fewest clients, repeat 1."""
    refs: dict[int, list[str]] = {}
    for clients in sorted(by_clients):
        for conversation, replies in by_clients[clients][0]["replies"].items():
            refs.setdefault(int(conversation), replies[0])
    return refs


def _equal_counts(figs: list[dict[str, Any]], refs: dict[int, list[str]]) -> list[int]:
    """[clients whose replies equal their conversation's reference, clients] over the repeats."""
    equal = total = 0
    for fig in figs:
        for conversation, replies in fig["replies"].items():
            for one in replies:
                total += 1
                equal += one == refs.get(int(conversation))
    return [equal, total]


def _acceptance(figs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Drafted and accepted tokens over the repeats, from the responses (llama-server) or the
    slots (ours), and the ratio."""
    drafted = accepted = 0.0
    seen = False
    for fig in figs:
        if fig["slots"]:
            seen = True
            drafted += sum(s["drafted"] for s in fig["slots"].values())
            accepted += sum(s["accepted"] for s in fig["slots"].values())
        elif fig["figures"].get("drafted") is not None:
            seen = True
            drafted += fig["figures"]["drafted"]
            accepted += fig["figures"].get("accepted") or 0
    if not seen:
        return None
    return {
        "drafted": drafted,
        "accepted": accepted,
        "rate": accepted / drafted if drafted else None,
    }


def _slots(figs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Ours: per slot, drafted and accepted over the repeats, and the ratio."""
    total: dict[str, list[float]] = {}
    for fig in figs:
        for slot, s in fig["slots"].items():
            t = total.setdefault(slot, [0.0, 0.0])
            t[0] += s["drafted"]
            t[1] += s["accepted"]
    return {
        slot: {"drafted": d, "accepted": a, "rate": a / d if d else 0.0}
        for slot, (d, a) in sorted(total.items(), key=lambda kv: int(kv[0]))
    }


def summarise_side(by_clients: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    refs = _references(by_clients)
    out: dict[str, Any] = {}
    for clients, figs in sorted(by_clients.items()):
        out[str(clients)] = {
            "tokens_per_second": _series(figs, "tokens_per_second", "tokens/s").summary(),
            "latency_p50_s": _series(figs, "latency_p50_s", "s").summary(),
            "latency_p95_s": _series(figs, "latency_p95_s", "s").summary(),
            "completion_tokens": _series(figs, "completion_tokens", "tokens").summary(),
            "requests": sum(f["figures"].get("requests", 0) for f in figs),
            "failed_clients": sum(len(f["errors"]) for f in figs),
            "errors": [e for f in figs for e in f["errors"]][:5],
            "finish_reasons": sorted(
                {r for f in figs for r in f["figures"].get("finish_reasons", [])}
            ),
            "acceptance": _acceptance(figs),
            "slot_acceptance": _slots(figs),
            # greedy: each client's replies against its conversation's first run (fewest clients)
            "replies_equal_reference": _equal_counts(figs, refs),
        }
    return out


def _ratios(
    ours: dict[int, list[dict[str, Any]]], peer: dict[int, list[dict[str, Any]]]
) -> dict[str, Any]:
    """Per client count, per repeat: tokens/s ours / peer; latency peer / ours (higher: ours
    faster)."""
    out: dict[str, Any] = {}
    for clients in sorted(set(ours) & set(peer)):
        o, p = ours[clients], peer[clients]
        out[str(clients)] = {
            "tokens_per_second": ratio_series(
                _series(o, "tokens_per_second", ""), _series(p, "tokens_per_second", "")
            ).summary(),
            "latency_p50": ratio_series(
                _series(p, "latency_p50_s", ""), _series(o, "latency_p50_s", "")
            ).summary(),
            "latency_p95": ratio_series(
                _series(p, "latency_p95_s", ""), _series(o, "latency_p95_s", "")
            ).summary(),
        }
    return out


def summarise(runs: Runs) -> dict[str, Any]:
    modes: dict[str, Any] = {}
    for mode, sides in runs.items():
        ours = sides.get("ours", {})
        refs = {side: _references(by) for side, by in sides.items()}
        modes[mode] = {
            "sides": {side: summarise_side(by) for side, by in sides.items()},
            "ours_over": {
                peer: _ratios(ours, by) for peer, by in sides.items() if peer != "ours" and ours
            },
            # repeat 1, fewest clients: the same replies as ours, conversation for conversation
            "replies_equal_ours": {
                side: {str(k): r == refs["ours"].get(k) for k, r in ref.items()}
                for side, ref in refs.items()
                if side != "ours" and "ours" in refs
            },
            "replies": {
                side: {str(k): [t[:160] for t in r] for k, r in ref.items()}
                for side, ref in refs.items()
            },
        }
    return {"modes": modes}


def method(setup: Setup, repeats: int) -> str:
    return (
        f"Each side serves over HTTP on loopback and is driven by {max(MODES[0].clients)} or "
        "fewer client threads in the bench's process (the official `openai` client, "
        f"non-streaming `chat.completions.create(temperature=0.0, max_tokens={setup.max_tokens})`"
        f"); each client runs one chat of {setup.turns} requests one after the other, appending "
        f"each reply to its messages. Client i has conversation i mod {N_CONVERSATIONS}: a "
        "first message of a few facts and a question, then other questions. "
        "Per run: generated tokens/s = the completion tokens of every request (its `usage`) / "
        "the wall time from the first call to the last answer; latency p50 and p95 over the "
        "run's requests (linear between ranks). Every server starts once per repeat and mode "
        "(ready when `/v1/models` answers), answers one untimed warm-up request "
        f"({WARMUP!r}, 4 tokens), then serves 1, 4 and 16 clients in that order; the sides "
        "run one after the other, their order reversed every other repeat; "
        "ratios per repeat. Same libllama and ggml (b11312) everywhere and "
        f"threads {setup.threads}: ours `python -m llama_bindings serve --slots {setup.slots} "
        f"--ctx-size {setup.ctx_size} --threads {setup.threads} --chat-template T` (its "
        "defaults otherwise: repacked CPU weights, flash attention auto); llama.cpp's "
        f"`llama-server -np {setup.slots} -c {setup.slots * setup.ctx_size} --threads "
        f"{setup.threads} --no-jinja --chat-template T` built from the same tree "
        "(LD_LIBRARY_PATH at our libraries; its defaults otherwise); llama-cpp-python 0.3.36's "
        "`python -m "
        f"llama_cpp.server --n_threads {setup.threads} --n_threads_batch {setup.threads} "
        "--chat_format T` (its package from the sdist, LLAMA_CPP_LIB_PATH at our libraries, "
        "its defaults otherwise: one `Llama`, n_ctx 2048, logits_all, requests one at a time). "
        "T is `gemma` on Gemma 3 270M Q4_K_M (its GGUF has no template) and `chatml` on the "
        "synthetic MTP model. ngram-mod: ours `--speculative ngram-mod`, llama-server "
        "`--spec-type ngram-mod`, each with its default draft sizes (llama-cpp-python's server "
        "has prompt-lookup decoding only, not measured). draft-mtp on the synthetic 'partial' "
        "test model (its MTP head agrees with the trunk only partly): ours `--speculative "
        "draft-mtp`, llama-server `--spec-type draft-mtp`; acceptance = accepted / drafted "
        "tokens: ours per slot from `/metrics` (scraped before and after each run), "
        "llama-server from each response's `timings` (draft_n, draft_n_accepted). Replies: "
        "each client's replies against its conversation's first run at the fewest clients "
        "(repeat 1) on the same side, and that first run against ours; recorded, not asserted. "
        f"{repeats} repeat(s)."
    )


def _peer(cache: Path, tmp: Path, lib_dir: Path) -> tuple[Path | None, Path | None, str | None]:
    """llama-cpp-python's server: (venv Python, llama_cpp package, why it cannot run)."""
    try:
        package = extract_llama_cpp_package(cache, tmp)
        python = peer_server_python(cache)
    except (FileNotFoundError, subprocess.CalledProcessError) as exc:
        return None, None, f"{type(exc).__name__}: {exc}"
    env = {"PYTHONPATH": str(package.parent), "LLAMA_CPP_LIB_PATH": str(lib_dir)}
    probe = run_measured([str(python), "-c", "import llama_cpp.server.app"], env)
    if probe.returncode != 0:
        lines = (probe.stderr or probe.stdout).strip().splitlines()
        return None, None, f"llama_cpp.server does not import: {lines[-1] if lines else ''}"
    return python, package, None


def run(setup: Setup, cache: Path, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-server-") as tmp:
        python, package, unavailable = _peer(cache, Path(tmp), setup.lib_dir)
        if unavailable:
            log(f"server: llama-cpp-python's server unavailable ({unavailable})")
        setup = replace(setup, peer_python=python, peer_package=package)
        begun = time.perf_counter()
        runs = collect(setup, repeats, Path(tmp))
        wall = time.perf_counter() - begun
    return {
        "method": method(setup, repeats),
        "models": {k: v.name for k, v in setup.models.items()},
        "peers": {
            "llama-server": "llama.cpp b11312 llama-server" if setup.llama_server else None,
            "llama-cpp-python": None if unavailable else "llama-cpp-python 0.3.36",
        },
        "peer_unavailable": unavailable,
        "wall_seconds": wall,
        "cpu_count": os.cpu_count(),
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "threads": setup.threads,
        "max_tokens": setup.max_tokens,
        "turns": setup.turns,
        "slots": setup.slots,
        "ctx_size": setup.ctx_size,
        "conversations": conversations(setup.turns),
        "configurations": {
            m.name: asdict(m) for m in MODES if setup.modes is None or m.name in setup.modes
        },
        **summarise(runs),
    }
