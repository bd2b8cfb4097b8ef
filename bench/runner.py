"""``python -m bench``: run the benchmarks, write bench/results/<name>.json, .md and .png."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench import (
    bumping,
    calls,
    chat,
    generation,
    importing,
    loops,
    realmodel,
    report,
    rpc,
    server,
    strategies,
    tag_builds,
)
from bench.stats import log

REPO = Path(__file__).resolve().parent.parent
SECTIONS = (
    "generation", "calls", "loop", "mtp", "bump", "import", "strategies", "realmodel", "chat",
    "tags", "rpc", "server",
)  # fmt: skip
# Sections a plain `python -m bench` runs; "bump" (minutes: a cold build), "strategies" (about
# 15 minutes on 2 cores), "realmodel" (Gemma 3 270M, about a minute per repeat) and "chat" (Gemma
# 3 270M, a 4-turn chat, about 1.5 minutes per repeat), "tags" (cold and warm builds of real
# tags: about 25 minutes on 2 cores), "rpc" (local vs split over two loopback RPC workers) and
# "server" (three OpenAI-compatible servers under 1, 4 and 16 chat clients) only when named.
DEFAULT_SECTIONS = ("generation", "calls", "loop", "mtp", "import")
# The tree the bench builds and runs by default: b11312, the one llama-cpp-python 0.3.36 vendors
# (its ctypes structs are b11312's; b11549's llama_context_params would not match them), so both
# sides of every comparison run on the same libraries. Our side imports that tree's own bindings,
# generated into the cache (_bindings), not the pin's generated/.
REF = "b11312"


def _cache() -> Path:
    sys.path.insert(0, str(REPO))
    from generator.paths import default_cache_dir

    return default_cache_dir()


def _cli(*args: str) -> str:
    """Run ``llama-bindgen`` from this checkout; its last stdout line."""
    out = subprocess.run(
        [sys.executable, "-m", "generator", *args],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    ).stdout
    return out.strip().splitlines()[-1]


def _model(cache: Path, kind: str, sizes: dict[str, Any]) -> Path:
    """A synthetic test model (cached; same arguments give identical bytes)."""
    tag = "-".join(f"{k}{v}" for k, v in sorted(sizes.items())) or "default"
    path = cache / "bench-models" / f"{kind}-{tag}.gguf"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        args = [f"--{k.replace('_', '-')}={v}" for k, v in sorted(sizes.items())]
        _cli("make-test-model", str(path), "--kind", kind, *args)
    return path


def _bindings(tree: Path, cache: Path) -> Path:
    """The folder holding ``tree``'s own ``llama_bindings`` package, generated into the cache on
    every run (the bindings of another tag would not fit the libraries: the ABI guard refuses)."""
    out = cache / "bench-bindings" / tree.name
    _cli("generate", "--tree", str(tree), "--out", str(out))
    return out


def _upstream_bin(cache: Path, tree: Path) -> Path:
    """Upstream's llama-speculative-simple, built out of tree from the same tree (cached)."""
    build = cache / "bench-upstream"
    exe = build / "bin" / "llama-speculative-simple"
    if exe.is_file():
        return exe.parent
    log(f"building upstream llama-speculative-simple in {build} (several minutes on 2 cores)")
    subprocess.run(
        [
            "cmake", "-S", str(tree), "-B", str(build), "-G", "Ninja",
            "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=ON", "-DLLAMA_BUILD_EXAMPLES=ON",
            "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_OPENSSL=OFF",
            "-DLLAMA_CURL=OFF", "-DGGML_NATIVE=OFF",
        ],
        check=True,
    )  # fmt: skip
    subprocess.run(
        ["cmake", "--build", str(build), "--target", "llama-speculative-simple", "-j2"], check=True
    )
    return exe.parent


def _chat(args: argparse.Namespace, bindings: Path, lib_dir: Path, cache: Path) -> dict[str, Any]:
    log("section chat: a 4-turn chat on Gemma 3 270M, ours vs llama-cpp-python's Llama")
    from generator.models import fetch_model

    setup = chat.Setup(
        repo=REPO,
        bindings=bindings,
        lib_dir=lib_dir,
        model=fetch_model("gemma3-270m", cache),
        max_tokens=8 if args.quick else args.chat_tokens,
        n_ctx=chat.N_CTX,
        threads=args.threads,
    )
    return chat.run(setup, cache, args.repeats)


def _server(
    args: argparse.Namespace, tree: Path, bindings: Path, lib_dir: Path, cache: Path
) -> dict[str, Any]:
    log("section server: ours vs llama-server vs llama-cpp-python's server, 1 to 16 clients")
    from generator.models import fetch_model

    setup = server.Setup(
        repo=REPO,
        bindings=bindings,
        lib_dir=lib_dir,
        models={
            "gemma": fetch_model("gemma3-270m", cache),
            "mtp": _model(cache, "partial", {}),
        },
        llama_server=None if args.no_upstream else server.llama_server_bin(cache, tree),
        peer_python=None,
        peer_package=None,
        threads=args.threads,
        max_tokens=8 if args.quick else args.server_tokens,
        turns=2 if args.quick else args.server_turns,
        ctx_size=1024,
        slots=16,
        clients=(1, 4) if args.quick else None,
        modes=tuple(args.server_modes) if args.server_modes else None,
    )
    return server.run(setup, cache, args.repeats)


def _rpc(args: argparse.Namespace, bindings: Path, lib_dir: Path, cache: Path) -> dict[str, Any]:
    log("section rpc: local vs split over two loopback RPC workers (test model, Gemma 3 270M)")
    import tempfile

    from generator.models import fetch_model

    setup = rpc.Setup(
        repo=REPO,
        bindings=bindings,
        lib_dir=lib_dir,
        models={
            "test": _model(cache, "agree", {}),
            "gemma": fetch_model("gemma3-270m", cache),
        },
        n=16 if args.quick else args.rpc_tokens,
        threads=args.threads,
    )
    with tempfile.TemporaryDirectory(prefix="bench-rpc-") as work:
        return rpc.run(setup, Path(work), args.repeats)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--name", default="latest", help="result name (default: %(default)s)")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    p.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(DEFAULT_SECTIONS))
    p.add_argument(
        "--tags", nargs="+", default=list(tag_builds.DEFAULT_TAGS),
        help="the tags section's consecutive tags, oldest first (%(default)s)",
    )  # fmt: skip
    p.add_argument("--tree", type=Path, help=f"llama.cpp tree (default: `fetch {REF}`)")
    p.add_argument("--lib-dir", type=Path, help="built libraries (default: `build` for the host)")
    p.add_argument(
        "--upstream-bin",
        type=Path,
        help="folder with upstream's llama-speculative-simple (default: built into the cache)",
    )
    p.add_argument(
        "--no-upstream",
        action="store_true",
        help="skip upstream's programs (llama-speculative-simple, llama-server)",
    )
    p.add_argument("--repeats", type=int, default=5, help="interleaved repeats (%(default)s)")
    p.add_argument("--threads", type=int, default=1, help="llama.cpp threads (%(default)s)")
    p.add_argument("--loop-tokens", type=int, default=128)
    p.add_argument(
        "--loop-model",
        choices=("bench", "tiny"),
        default="bench",
        help="section 3's model: bench (31M parameters, decode-bound) or tiny (overhead-bound)",
    )
    p.add_argument("--mtp-tokens", type=int, default=96)
    p.add_argument("--draft-max", type=int, nargs="+", default=[1, 3, 5])
    p.add_argument(
        "--strategies-draft-max",
        type=int,
        default=8,
        help="the strategies section's draft max (%(default)s: ngram-cache's own draft length)",
    )
    p.add_argument(
        "--mtp-weight-type",
        choices=("f16", "f32"),
        default="f16",
        help="matrix type of the MTP section's models (%(default)s)",
    )
    p.add_argument("--realmodel-tokens", type=int, default=128)
    p.add_argument(
        "--realmodel-flash-attn",
        choices=("on", "off"),
        default="on",
        help="flash attention on both sides in the realmodel section (%(default)s)",
    )
    p.add_argument(
        "--chat-tokens", type=int, default=48, help="the chat section's reply length (%(default)s)"
    )
    p.add_argument(
        "--rpc-tokens", type=int, default=64, help="the rpc section's tokens per run (%(default)s)"
    )
    p.add_argument(
        "--server-tokens",
        type=int,
        default=48,
        help="the server section's max_tokens (%(default)s)",
    )
    p.add_argument(
        "--server-turns",
        type=int,
        default=3,
        help="the server section's requests per client (%(default)s)",
    )
    p.add_argument(
        "--server-modes",
        nargs="+",
        choices=[mode.name for mode in server.MODES],
        help="the server section's modes (default: all)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="tiny models and short runs: checks that the bench works, measures nothing useful",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cache = _cache()
    pinned = set(args.sections) != {"tags"}  # every section but "tags" runs on the pin's build
    tree: Path = args.tree or (Path(_cli("fetch", REF)) if pinned else Path())
    built = Path(_cli("build", "--tree", str(tree), "--platform", "linux-x86_64")) if (
        pinned and args.lib_dir is None) else Path()  # fmt: skip
    lib_dir: Path = args.lib_dir or built / "lib"
    include_dir = lib_dir.parent / "include"
    bindings = _bindings(tree, cache) if pinned else REPO / "generated"
    sys.path.insert(0, str(bindings))
    import llama_bindings

    load = os.getloadavg()
    result: dict[str, Any] = {
        "name": args.name,
        "environment": {
            "llama_cpp_tag": llama_bindings.LLAMA_CPP_TAG,
            "llama_cpp_commit": llama_bindings.LLAMA_CPP_COMMIT,
            "generator_version": llama_bindings.GENERATOR_VERSION,
            "cpu_count": os.cpu_count(),
            "load_average": [round(x, 2) for x in load],
            "python": platform.python_version(),
            "machine": platform.machine(),
            "threads": args.threads,
            "repeats": args.repeats,
            "quick": args.quick,
        },
        "sections": {},
    }
    if args.quick:
        big_loop: dict[str, Any] = {}
        big_mtp: dict[str, Any] = {}
    else:
        big_loop = {"embd": 512, "ff": 1536, "layers": 8, "vocab": 8192}
        big_mtp = {"embd": 1024, "ff": 3072, "layers": 8, "vocab": 16384}
        if args.mtp_weight_type == "f16":  # f32 is the generator's default (and not in the name)
            big_mtp["weight_type"] = "f16"
    sections = result["sections"]
    if "generation" in args.sections:
        log("section 1: generate vs clang2py")
        sections["generation"] = generation.run(tree, REPO, cache, args.repeats)
    if "calls" in args.sections:
        log("section 2: foreign-call overhead")
        api_mode = llama_bindings.loader.find_api_module(lib_dir) is not None
        if not api_mode:
            log(f"no API-mode module in {lib_dir}: measuring cffi ABI mode only")
        n_calls, n_fills = (20_000, 20) if args.quick else (200_000, 200)
        sections["calls"] = calls.run(
            REPO, bindings, lib_dir, cache, _model(cache, "plain", {}), args.repeats, api_mode,
            calls=n_calls, fills=n_fills,
        )  # fmt: skip
    runner = loops.Runner(REPO, bindings, lib_dir, args.threads, 1024)
    if "loop" in args.sections:
        log("section 3: generation loop, runtime vs C driver")
        driver = loops.build_driver(include_dir, lib_dir, cache)
        model = _model(cache, "plain", {} if args.loop_model == "tiny" else big_loop)
        n = 16 if args.quick else args.loop_tokens
        sections["loop"] = loops.run_loop(runner, driver, model, n, args.repeats)
    if "mtp" in args.sections:
        log("section 4: MTP")
        upstream = None
        if not args.no_upstream:
            upstream = args.upstream_bin or _upstream_bin(cache, tree)
        models = {kind: _model(cache, kind, big_mtp) for kind in ("agree", "partial")}
        n = 16 if args.quick else args.mtp_tokens
        sections["mtp"] = loops.run_mtp(runner, upstream, models, n, args.draft_max, args.repeats)
    if "strategies" in args.sections:
        log("section strategies: every speculative strategy, ours vs upstream's driver")
        upstream = None
        if not args.no_upstream:
            upstream = args.upstream_bin or _upstream_bin(cache, tree)
        vocab = int(big_mtp.get("vocab", 256))
        target_sizes = {**big_mtp, "vocab": max(vocab, 512)}
        # a layer draft (eagle3, dflash, dspark) for the target of these sizes is f32 whatever
        # the target's weight type, which it does not take
        draft_sizes = {k: v for k, v in target_sizes.items() if k != "weight_type"}
        drafts = {
            # draft-simple's draft: the same trunk rule and vocabulary, no MTP head, 2 layers
            "draft-simple": _model(cache, "plain", {**target_sizes, "layers": 2}),
            **{
                kind: _model(cache, kind.removeprefix("draft-"), draft_sizes)
                for kind in strategies.DRAFT_MODEL_KINDS
                if kind != "draft-simple"
            },
        }
        setup = strategies.Setup(
            runner=runner,
            upstream_bin=upstream,
            target=_model(cache, "agree", target_sizes),
            drafts=drafts,
            n_vocab=max(vocab, 512),
            n=16 if args.quick else args.mtp_tokens,
            draft_max=args.strategies_draft_max,
        )
        sections["strategies"] = strategies.run(setup, args.repeats)
    if "realmodel" in args.sections:
        log("section realmodel: Gemma 3 270M, ours vs llama-cpp-python's Llama")
        from generator.models import fetch_model

        rm_setup = realmodel.Setup(
            repo=REPO,
            bindings=bindings,
            lib_dir=lib_dir,
            model=fetch_model("gemma3-270m", cache),
            n=16 if args.quick else args.realmodel_tokens,
            n_ctx=512,
            n_batch=512,
            threads=args.threads,
            flash_attn=args.realmodel_flash_attn,
        )
        sections["realmodel"] = realmodel.run(rm_setup, cache, args.repeats)
    if "chat" in args.sections:
        sections["chat"] = _chat(args, bindings, lib_dir, cache)
    if "server" in args.sections:
        sections["server"] = _server(args, tree, bindings, lib_dir, cache)
    if "rpc" in args.sections:
        sections["rpc"] = _rpc(args, bindings, lib_dir, cache)
    if "import" in args.sections:
        log("section 6: import and load vs llama-cpp-python")
        api_mode = llama_bindings.loader.find_api_module(lib_dir) is not None
        sections["import"] = importing.run(bindings, lib_dir, cache, args.repeats, api_mode)
    if "bump" in args.sections:
        log("section 5: bump beyond its builds")
        sections["bump"] = bumping.run(tree, REPO, cache, REF, args.repeats)
    if "tags" in args.sections:
        log("section tags: a new tag's build after the last one vs cold")
        sections["tags"] = tag_builds.run(REPO, cache, tuple(args.tags))
    args.out.mkdir(parents=True, exist_ok=True)
    json_path = args.out / f"{args.name}.json"
    json_path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    chart_path = args.out / f"{args.name}.png"
    report.chart(result, chart_path)
    md_path = args.out / f"{args.name}.md"
    md_path.write_text(report.markdown(result, chart_path.name))
    log(f"wrote {json_path}, {md_path.name}, {chart_path.name}")
    print(md_path)
    return 0
