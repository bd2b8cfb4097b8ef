"""Section "realmodel": greedy generation on a real model (Gemma 3 270M Q4_K_M), our runtime vs
llama-cpp-python 0.3.36's ``Llama`` on the same libraries: plain decoding of a story prompt, and
n-gram speculation (ours: ngram-simple and ngram-mod; theirs: prompt-lookup decoding) on a
copy-edit prompt whose answer repeats its text.

Each run is a process of its own (``bench.realmodel_worker``); per repeat every configuration runs
once, each of ours beside its counterpart of theirs, ours first in every other repeat; ratios are
taken per repeat. llama-cpp-python runs from its ``llama_cpp/`` package extracted from the cached
sdist, with ``LLAMA_CPP_LIB_PATH`` at our libraries (as in sections 2 and 6); when it is missing
or does not import, the section says so and measures ours only.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.calls import extract_llama_cpp_package
from bench.stats import Series, log, ratio_series, run_measured

STORY = (
    "The lighthouse on Gull Point had been dark for eleven years when Mara Quill rowed across the "
    "bay with a crate of tools, a lantern and a letter from the harbour board. The letter said the "
    "light was hers to mend if she could, and hers to keep if she did. Nobody in the village "
    "believed she would last the winter. The keeper's cottage had lost half its roof to the "
    "storms, the stairs inside the tower were rusted through in places, and the great lens at the "
    "top was cracked from rim to centre. On her first night she slept in the lamp room, wrapped "
    "in a sail, and listened to the wind. In the morning"
)
COPY_EDIT = (
    "Fix the spelling mistakes in the text below and write out the whole corrected text.\n\n"
    "Text: The old lighthouse keeper climbed the winding stairs every evening to light the great "
    "lamp. He had done this for fourty years, through storms and calm nights alike, and he knew "
    "every step by hart. When the ships passed safely into the harbour, he would wave from the "
    "balcony, even though nobody could see him in the dark. His daughter worried that the climb "
    "was to much for him now, but he always said that the light could not wait.\n\n"
    "Corrected text: The old lighthouse keeper climbed"
)
PROMPTS = {"story": STORY, "copy_edit": COPY_EDIT}
WARMUP = "Hello"
DRAFT_MAX = 8
PLAIN = "plain"


@dataclass(frozen=True)
class Config:
    """One run kind: its name, side and speculative options (None: plain decoding)."""

    name: str
    side: str  # "ours" or "theirs"
    speculative: dict[str, Any] | None


def _ours(*strategies: dict[str, Any]) -> dict[str, Any]:
    return {"strategies": list(strategies), "draft_max": DRAFT_MAX}


# Per prompt: pairs (ours, theirs), compared with each other; plain first.
PAIRS: dict[str, tuple[tuple[Config, Config], ...]] = {
    "story": ((Config(f"ours_{PLAIN}", "ours", None), Config(f"theirs_{PLAIN}", "theirs", None)),),
    "copy_edit": (
        (Config(f"ours_{PLAIN}", "ours", None), Config(f"theirs_{PLAIN}", "theirs", None)),
        (
            Config(
                "ours_ngram-simple",
                "ours",
                _ours({"kind": "ngram-simple", "size_n": 3, "size_m": DRAFT_MAX}),
            ),
            # n-gram of at most 3 tokens (theirs falls back to 2 and 1), drafts of 8
            Config(
                "theirs_prompt-lookup",
                "theirs",
                {"max_ngram_size": 3, "num_pred_tokens": DRAFT_MAX},
            ),
        ),
        (
            # llama.cpp's defaults (n-gram 24, drafts 48 to 64, capped by the draft max 8)
            Config("ours_ngram-mod", "ours", _ours({"kind": "ngram-mod"})),
            # LlamaPromptLookupDecoding's defaults
            Config(
                "theirs_prompt-lookup-default",
                "theirs",
                {"max_ngram_size": 2, "num_pred_tokens": 10},
            ),
        ),
    ),
}


@dataclass(frozen=True)
class Setup:
    repo: Path
    bindings: Path  # the folder holding the llama_bindings package that fits lib_dir
    lib_dir: Path
    model: Path
    n: int
    n_ctx: int
    n_batch: int
    threads: int
    flash_attn: str


def _theirs_env(package: Path | None, lib_dir: Path) -> dict[str, str] | str:
    """llama-cpp-python's environment, or why it cannot run (``Llama`` does not import)."""
    if package is None:
        return "the llama-cpp-python 0.3.36 sdist is not in the cache"
    env = {"PYTHONPATH": str(package.parent), "LLAMA_CPP_LIB_PATH": str(lib_dir)}
    probe = run_measured([sys.executable, "-c", "from llama_cpp import Llama"], env)
    if probe.returncode != 0:
        lines = (probe.stderr or probe.stdout).strip().splitlines()
        return f"llama-cpp-python does not import here: {lines[-1] if lines else probe.returncode}"
    return env


def run_one(setup: Setup, config: Config, prompt: str, env: dict[str, str]) -> dict[str, Any]:
    spec = {
        "side": config.side, "model": str(setup.model), "lib_dir": str(setup.lib_dir),
        "prompt": prompt, "n": setup.n, "n_ctx": setup.n_ctx, "n_batch": setup.n_batch,
        "threads": setup.threads, "flash_attn": setup.flash_attn, "warmup": WARMUP,
        "speculative": config.speculative,
    }  # fmt: skip
    path = f"{setup.bindings}:{setup.repo}"
    if "PYTHONPATH" in env:
        path += f":{env['PYTHONPATH']}"
    r = run_measured(
        [sys.executable, "-m", "bench.realmodel_worker", json.dumps(spec)],
        {**env, "PYTHONPATH": path},
    )
    if r.returncode != 0:
        raise RuntimeError(f"realmodel {config.name} failed:\n{r.stderr[-2000:]}")
    fig: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    fig["peak_rss_mb"] = r.peak_rss_mb
    return fig


def collect(
    setup: Setup, repeats: int, theirs: dict[str, str] | None
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """prompt -> run name -> one figure dict per repeat."""
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {p: {} for p in PROMPTS}
    for i in range(repeats):
        for prompt_name, pairs in PAIRS.items():
            log(f"realmodel: repeat {i + 1}/{repeats}, {prompt_name} prompt")
            for pair in pairs:
                order = pair if i % 2 == 0 else pair[::-1]
                for config in order:
                    if config.side == "theirs" and theirs is None:
                        continue
                    fig = run_one(setup, config, PROMPTS[prompt_name], theirs or {})
                    runs[prompt_name].setdefault(config.name, []).append(fig)
                    log(
                        f"realmodel {config.name}: prompt {fig['prompt_tokens_per_second']:.0f} "
                        f"tok/s, generation {fig['tokens_per_second']:.1f} tok/s"
                    )
    return runs


def _series(figs: list[dict[str, Any]], key: str, unit: str) -> Series:
    return Series(unit, [float(f[key]) for f in figs])


def _own(figs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    return Series("count", [float(f["own_metrics"][key]) for f in figs]).summary()


def summarise_prompt(
    runs: dict[str, list[dict[str, Any]]], pairs: tuple[tuple[Config, Config], ...]
) -> dict[str, Any]:
    keys = ("tokens_per_second", "prompt_tokens_per_second", "call_seconds", "peak_rss_mb")
    units = ("tokens/s", "tokens/s", "s", "MB")
    series = {
        k: {n: _series(f, k, u) for n, f in runs.items()} for k, u in zip(keys, units, strict=True)
    }
    tps, pps, call = (series[k] for k in keys[:3])
    ours_plain = runs[f"ours_{PLAIN}"]
    compared = [(o.name, t.name) for o, t in pairs if o.name in runs and t.name in runs]

    def same(name: str, ref: list[dict[str, Any]], key: str) -> bool:
        return all(f[key] == r[key] for f, r in zip(runs[name], ref, strict=True))

    return {
        "tokens_per_second": {n: s.summary() for n, s in tps.items()},
        "prompt_tokens_per_second": {n: s.summary() for n, s in pps.items()},
        "call_seconds": {n: s.summary() for n, s in call.items()},
        "peak_rss_mb": {n: s.summary() for n, s in series["peak_rss_mb"].items()},
        "ours_over_theirs": {
            f"{o}/{t}": {
                "tokens_per_second": ratio_series(tps[o], tps[t]).summary(),
                "prompt_tokens_per_second": ratio_series(pps[o], pps[t]).summary(),
                # end to end (prompt included): theirs' call time / ours, higher: ours faster
                "call_speed": ratio_series(call[t], call[o]).summary(),
            }
            for o, t in compared
        },
        "speedup_vs_own_plain": {
            n: ratio_series(s, tps[f"{n.split('_')[0]}_{PLAIN}"]).summary()
            for n, s in tps.items()
            if not n.endswith(PLAIN) and f"{n.split('_')[0]}_{PLAIN}" in tps
        },
        "steps": {n: _own(f, "steps") for n, f in runs.items()},
        "drafted_tokens": {n: _own(f, "drafted_tokens") for n, f in runs.items()},
        "generated_tokens": {
            n: _series(f, "generated_tokens", "tokens").summary() for n, f in runs.items()
        },
        # token for token, every repeat: the same prompt ids and output as ours plain
        "prompt_equals_ours": {n: same(n, ours_plain, "prompt") for n in runs},
        "output_equals_ours_plain": {n: same(n, ours_plain, "tokens") for n in runs},
        "finish_reasons": {
            n: sorted({f["finish_reason"] for f in figs}) for n, figs in runs.items()
        },
        "settings": {n: figs[0]["settings"] for n, figs in runs.items()},
        "ours_plain_text": ours_plain[0]["text"],
    }


def method(setup: Setup, repeats: int) -> str:
    return (
        f"Gemma 3 270M Q4_K_M (`{setup.model.name}`, vocabulary 262144), greedy, {setup.n} "
        f"tokens, n_threads = n_threads_batch = {setup.threads}, n_ctx {setup.n_ctx}, n_batch = "
        f"n_ubatch = {setup.n_batch}, flash_attn {setup.flash_attn!r} on both sides "
        "(llama.cpp's other defaults: f16 KV cache, full-size SWA cache), the same libllama and "
        "ggml (ours: `Model(lib_dir=...)`; theirs: LLAMA_CPP_LIB_PATH). A fresh process per run, "
        f"{repeats} repeat(s); per repeat and prompt each pair runs side by side (ours first in "
        "every other repeat); ratios per repeat. Each process first generates 2 tokens after "
        f"{WARMUP!r} (untimed; ours on a context of its own, theirs then `Llama.reset()` so that "
        "the timed prompt is decoded whole). Ours: `Context.generate(prompt, max_tokens=N, "
        "on_token=...)` (default sampling: greedy), with `SpeculativeDecoding(strategies=(...,), "
        f"draft_token_max={DRAFT_MAX})` for ngram-simple (size_n 3, size_m {DRAFT_MAX}) and "
        "ngram-mod (llama.cpp's defaults). Theirs: llama-cpp-python 0.3.36 "
        "`Llama(...).create_completion(prompt, max_tokens=N, temperature=0.0)`: its sampler "
        "chain is then penalties (repeat 1.0, frequency and presence 0: a no-op) and greedy; per "
        "token it detokenizes the whole completion so far and checks for stop sequences; "
        "prompt-lookup: `Llama(..., draft_model=LlamaPromptLookupDecoding(max_ngram_size, "
        "num_pred_tokens))`, which makes it compute and copy the logits of every row (it sets "
        "logits_all), the prompt's included, and samples each row in Python. Timing, the same on "
        "both sides from the caller's side: the call starts the clock; prompt processing ends "
        "when the prompt's decode returns (ours: where GenerationMetrics.generation_seconds "
        "starts; theirs: the return of its first Llama.eval); generation tokens/s = generated "
        "tokens / time from there to the last token handed over (ours: on_token; theirs: "
        "Llama.generate, wrapped on the instance to stamp and count). With speculation ours "
        "decodes the prompt's last token with the first draft, so that token's decode counts in "
        "its generation. call_speed = theirs' whole call time / ours (prompt included). Steps: "
        "target decodes after the prompt (ours: GenerationMetrics.steps, which counts a plain "
        "run's N samples; theirs: Llama.eval calls after the prompt's); drafted: ours "
        "GenerationMetrics.drafted_tokens, theirs tokens evaluated beyond one per step. Outputs "
        "compared token for token with ours plain of the same repeat, and reported, not asserted."
    )


def run(setup: Setup, cache: Path, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-realmodel-") as tmp:
        try:
            package: Path | None = extract_llama_cpp_package(cache, Path(tmp))
        except FileNotFoundError:
            package = None
        env = _theirs_env(package, setup.lib_dir)
        unavailable = env if isinstance(env, str) else None
        if unavailable:
            log(f"realmodel: llama-cpp-python unavailable, measuring ours only ({unavailable})")
        started = time.perf_counter()
        runs = collect(setup, repeats, None if isinstance(env, str) else env)
        wall = time.perf_counter() - started
    prompts = {p: summarise_prompt(runs[p], PAIRS[p]) for p in PROMPTS}
    return {
        "method": method(setup, repeats),
        "model": setup.model.name,
        "peer": None if unavailable else "llama-cpp-python 0.3.36",
        "peer_unavailable": unavailable,
        # the machine is shared: how long the section took, and the load when it ended
        "wall_seconds": wall,
        "cpu_count": os.cpu_count(),
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "tokens": setup.n,
        "draft_max": DRAFT_MAX,
        "flash_attn": setup.flash_attn,
        "prompts": {p: {"text": t, **prompts[p]} for p, t in PROMPTS.items()},
        "pairs": {p: [[o.name, t.name] for o, t in pairs] for p, pairs in PAIRS.items()},
        "configurations": {
            c.name: c.speculative for pairs in PAIRS.values() for pair in pairs for c in pair
        },
    }
