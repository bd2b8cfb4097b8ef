"""Sections 3 and 4: greedy generation through our runtime vs a C driver, and MTP speculative
decoding through our runtime vs upstream's ``llama-speculative-simple`` on the same libraries."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.stats import ProcessRun, Series, check, log, ratio_series, run_measured

PROMPT = "The quick brown fox jumps over the lazy dog"
DRIVER_SOURCE = Path(__file__).with_name("greedy_driver.c")


def build_driver(include_dir: Path, lib_dir: Path, cache: Path) -> Path:
    """Compile bench/greedy_driver.c against the libraries under test (cached by mtime)."""
    out = cache / "bench-bin" / "greedy_driver"
    if out.is_file() and out.stat().st_mtime >= DRIVER_SOURCE.stat().st_mtime:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        "cc", "-O2", "-std=c11", "-Wall", f"-I{include_dir}", str(DRIVER_SOURCE),
        f"-L{lib_dir}", "-lllama", "-lggml", "-lggml-base", f"-Wl,-rpath,{lib_dir}",
        "-o", str(out),
    ]  # fmt: skip
    subprocess.run(cmd, check=True)
    return out


@dataclass(frozen=True)
class Runner:
    repo: Path
    bindings: Path  # the folder holding the llama_bindings package that fits lib_dir
    lib_dir: Path
    threads: int
    n_ctx: int

    def python(
        self,
        model: Path,
        n: int,
        draft_max: int = 0,
        warmup: bool = False,
        no_abort_callback: bool = False,
    ) -> ProcessRun:
        cmd = [
            sys.executable, "-m", "bench.py_generate", str(model), PROMPT, str(n),
            str(self.threads), str(self.n_ctx), str(self.lib_dir), str(draft_max),
            "1" if warmup else "0", "1" if no_abort_callback else "0",
        ]  # fmt: skip
        env = {"PYTHONPATH": f"{self.bindings}:{self.repo}"}
        return check(run_measured(cmd, env), f"runtime generation (draft max {draft_max})")

    def c_driver(self, driver: Path, model: Path, n: int) -> ProcessRun:
        cmd = [str(driver), str(model), PROMPT, str(n), str(self.threads), str(self.n_ctx)]
        return check(run_measured(cmd), "C driver")

    def upstream(self, upstream_bin: Path, model: Path, n: int, draft_max: int) -> ProcessRun:
        cmd = [
            str(upstream_bin / "llama-speculative-simple"), "-m", str(model), "-p", PROMPT,
            "-n", str(n), "-t", str(self.threads), "-tb", str(self.threads),
            "--spec-type", "draft-mtp", "--spec-draft-n-max", str(draft_max),
            "--top-k", "1", "--samplers", "top_k", "-c", str(self.n_ctx),
        ]  # fmt: skip
        # our libllama and ggml first: the same libraries as every other run (the upstream
        # binary's RUNPATH only supplies its libllama-common)
        env = {"LD_LIBRARY_PATH": f"{self.lib_dir}:{upstream_bin}"}
        return check(run_measured(cmd, env), f"llama-speculative-simple (n_max {draft_max})")


def json_line(run: ProcessRun) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return result


_DECODED = re.compile(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t/s")
_DRAFTED = re.compile(r"n_drafted\s*=\s*(\d+)")
_ACCEPT = re.compile(r"n_accept\s*=\s*(\d+)")


def parse_upstream(text: str) -> dict[str, float]:
    """Figures upstream's speculative-simple logs at its end."""
    decoded, drafted, accepted = _DECODED.search(text), _DRAFTED.search(text), _ACCEPT.search(text)
    if not (decoded and drafted and accepted):
        raise RuntimeError(f"llama-speculative-simple printed no statistics:\n{text[-1500:]}")
    return {
        "generated_tokens": float(decoded.group(1)),
        "generation_seconds": float(decoded.group(2)),
        "tokens_per_second": float(decoded.group(1)) / float(decoded.group(2)),
        "drafted_tokens": float(drafted.group(1)),
        "accepted_tokens": float(accepted.group(1)),
    }


def _upstream_with_statistics(
    runner: Runner, upstream_bin: Path, model: Path, n: int, k: int, tries: int = 3
) -> tuple[ProcessRun, dict[str, Any]]:
    """Run upstream's driver until its log has the statistics: it sometimes exits (status 0)
    before its asynchronous logger printed the last lines. The rerun count is reported."""
    for attempt in range(tries):
        r = runner.upstream(upstream_bin, model, n, k)
        try:
            fig: dict[str, Any] = dict(parse_upstream(r.stdout + r.stderr))
        except RuntimeError:
            if attempt == tries - 1:
                raise
            log(f"llama-speculative-simple (n_max {k}) printed no statistics; running it again")
            continue
        fig["reruns"] = attempt
        return r, fig
    raise AssertionError("unreachable")


def run_loop(runner: Runner, driver: Path, model: Path, n: int, repeats: int) -> dict[str, Any]:
    """Section 3: plain greedy generation, runtime vs C driver, interleaved."""
    names = ("c_driver", "python_runtime", "python_runtime_no_abort_callback")
    tps = {name: Series("tokens/s") for name in names}
    peak = {name: Series("MB") for name in names}
    identical = True
    for i in range(repeats):
        c = runner.c_driver(driver, model, n)
        py = runner.python(model, n)
        nocb = runner.python(model, n, no_abort_callback=True)
        cj, pj, nj = json_line(c), json_line(py), json_line(nocb)
        identical = identical and cj["tokens"] == pj["tokens"] == nj["tokens"]
        tps["c_driver"].add(cj["tokens_per_second"])
        tps["python_runtime"].add(pj["tokens_per_second"])
        peak["c_driver"].add(c.peak_rss_mb)
        peak["python_runtime"].add(py.peak_rss_mb)
        tps["python_runtime_no_abort_callback"].add(nj["tokens_per_second"])
        peak["python_runtime_no_abort_callback"].add(nocb.peak_rss_mb)
        log(
            f"loop {i + 1}/{repeats}: C {cj['tokens_per_second']:.1f} tok/s, "
            f"Python {pj['tokens_per_second']:.1f} tok/s, "
            f"without abort callback {nj['tokens_per_second']:.1f} tok/s"
        )
    return {
        "method": (
            f"greedy generation of {n} tokens after a {PROMPT!r} prompt, {runner.threads} "
            f"thread(s), n_ctx {runner.n_ctx}; a fresh process per run, C driver and runtime "
            "alternating. tokens/s = generated tokens / time from the end of the prompt's decode "
            "to the last token (both sample, check end-of-generation, convert the token to text "
            "and decode one token per step). python_runtime_no_abort_callback: diagnostic, the "
            "same runtime with its Python abort callback cleared after the context is made."
        ),
        "model": model.name,
        "tokens_per_second": {k: v.summary() for k, v in tps.items()},
        "peak_rss_mb": {k: v.summary() for k, v in peak.items()},
        "ratio_python_over_c": ratio_series(tps["python_runtime"], tps["c_driver"]).summary(),
        # per repeat: 1e6 / python - 1e6 / C, the runtime's extra time per generated token
        "python_overhead_us_per_token": Series(
            "us",
            [
                1e6 / p - 1e6 / c
                for p, c in zip(tps["python_runtime"].values, tps["c_driver"].values, strict=True)
            ],
        ).summary(),
        "ratio_python_no_abort_callback_over_c": ratio_series(
            tps["python_runtime_no_abort_callback"], tps["c_driver"]
        ).summary(),
        "identical_tokens": identical,
    }


def _ordered(configs: list[tuple[str, int]], swap: bool) -> list[tuple[str, int]]:
    """``configs`` with each upstream/ours pair swapped when ``swap``: alternate repeats run ours
    first, so an order effect (caches, clock) does not favour one side."""
    if not swap:
        return configs
    out = list(configs)
    for j in range(len(out) - 1):
        if out[j][0].startswith("upstream") and out[j + 1][0].startswith("ours"):
            out[j], out[j + 1] = out[j + 1], out[j]
    return out


def run_mtp(
    runner: Runner,
    upstream_bin: Path | None,
    models: dict[str, Path],
    n: int,
    draft_maxes: list[int],
    repeats: int,
) -> dict[str, Any]:
    """Section 4: our runtime without MTP and with draft max k, and upstream's driver with k."""
    out: dict[str, Any] = {
        "method": (
            f"greedy generation of {n} tokens, {runner.threads} thread(s), n_ctx {runner.n_ctx}, "
            "a fresh process per run; per repeat every configuration runs once, in order (plain, "
            "then per draft max: upstream and ours, ours first in every other repeat). Ours: "
            "llama_bindings.runtime with "
            "SpeculativeDecoding(DRAFT_MTP, draft_token_max=k), tokens/s from its metrics "
            "(prompt excluded), after one 2-token warm-up generation on the same context "
            "(upstream warms up too). Upstream: llama-speculative-simple --spec-type draft-mtp "
            "--spec-draft-n-max k --top-k 1 --samplers top_k, tokens/s from its 'decoded N "
            "tokens in T seconds' line (prompt excluded), run against the same libllama and ggml "
            "(LD_LIBRARY_PATH). Upstream stops only after a whole draft, a few tokens past N: "
            "ours then generates as many tokens as upstream decodes (the same count in every "
            "repeat, checked), so both do the same work (ours_mtp_generated_tokens); a run whose "
            "log lacks the statistics (its logger is asynchronous and sometimes loses the last "
            "lines at exit) is run again and counted. Acceptance = "
            "accepted / drafted. Peak RSS of the whole process."
        ),
        "models": {},
    }
    for kind, model in models.items():
        configs: list[tuple[str, int]] = [("ours_plain", 0)]
        for k in draft_maxes:
            if upstream_bin is not None:
                configs.append((f"upstream_mtp_{k}", k))
            configs.append((f"ours_mtp_{k}", k))
        tps = {name: Series("tokens/s") for name, _ in configs}
        peak = {name: Series("MB") for name, _ in configs}
        acceptance = {name: Series("accepted/drafted") for name, k in configs if k}
        counts = {name: Series("tokens") for name, k in configs if name.startswith("ours_mtp")}
        same_as_plain = True
        reruns = 0
        upstream_count: dict[int, int] = {}
        for i in range(repeats):
            plain_tokens: list[int] = []
            for name, k in _ordered(configs, swap=i % 2 == 1 and upstream_bin is not None):
                if name.startswith("upstream"):
                    assert upstream_bin is not None
                    r, fig = _upstream_with_statistics(runner, upstream_bin, model, n, k)
                    reruns += fig.pop("reruns")
                    count = int(fig["generated_tokens"])
                    if upstream_count.setdefault(k, count) != count:
                        raise RuntimeError(f"upstream's token count changed: {count} (n_max {k})")
                else:
                    # as many tokens as upstream decoded with the same draft max (it stops only
                    # after a whole draft, past n): both runs then do the same work
                    r = runner.python(model, upstream_count.get(k, n), k, warmup=True)
                    fig = json_line(r)
                    if k == 0:
                        plain_tokens = fig["tokens"]
                    else:
                        counts[name].add(len(fig["tokens"]))
                        # ours runs at least as long as plain: its output must start with plain's
                        if fig["tokens"][: len(plain_tokens)] != plain_tokens:
                            same_as_plain = False
                tps[name].add(fig["tokens_per_second"])
                peak[name].add(r.peak_rss_mb)
                if k:
                    drafted = fig["drafted_tokens"]
                    acceptance[name].add(fig["accepted_tokens"] / drafted if drafted else 0.0)
                log(f"mtp {kind} {i + 1}/{repeats} {name}: {fig['tokens_per_second']:.1f} tok/s")
        speedup = {
            name: ratio_series(tps[name], tps["ours_plain"]).summary()
            for name, _ in configs
            if name != "ours_plain"
        }
        ours_vs_upstream = {
            f"n_max_{k}": ratio_series(tps[f"ours_mtp_{k}"], tps[f"upstream_mtp_{k}"]).summary()
            for k in draft_maxes
            if upstream_bin is not None
        }
        out["models"][kind] = {
            "model": model.name,
            "tokens_per_second": {k: v.summary() for k, v in tps.items()},
            "peak_rss_mb": {k: v.summary() for k, v in peak.items()},
            "acceptance": {k: v.summary() for k, v in acceptance.items()},
            "ours_mtp_generated_tokens": {k: v.summary() for k, v in counts.items()},
            "speedup_vs_ours_plain": speedup,
            "ours_over_upstream": ours_vs_upstream,
            "ours_mtp_output_equals_plain": same_as_plain,
            "upstream_reruns_missing_statistics": reruns,
        }
    return out
