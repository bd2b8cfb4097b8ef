"""Section "strategies": every upstream speculative strategy, alone and mixed, through our runtime
against upstream's ``llama-speculative-simple`` with the same ``--spec-type`` list, on a prompt
whose continuation repeats it (n-gram drafts are right) and on one whose continuation does not.

The synthetic models' trunk predicts ``t -> t + 1``: after ids 100..399 then 100..110 the greedy
continuation 111, 112, ... repeats the prompt; after 100..110 alone nothing repeats. Their "test"
vocabulary hashes 5-character chunks of text to ids, so :func:`text_for_test_vocab` writes a text
that upstream's driver tokenizes to exactly those ids (it takes text only); ours is given the ids,
and every upstream run's echo of its prompt is checked against them.

The strategies that draft with a model of their own (:data:`DRAFT_MODEL_KINDS`) get it as
upstream's ``-md`` and as our ``draft_model``: draft-simple a plain model of the same trunk rule,
draft-eagle3, draft-dflash and draft-dspark the agreeing test drafts of ``generator/testdrafts.py``
for the target (they read its hidden states and share its embeddings and output head).
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.loops import Runner, json_line, parse_upstream
from bench.stats import ProcessRun, Series, log, ratio_series, run_measured

PROMPTS: dict[str, list[int]] = {
    "repetitive": [*range(100, 400), *range(100, 111)],
    "non_repetitive": list(range(100, 111)),
}
PLAIN = "plain"
# (name, strategies in llama.cpp's --spec-type names); plain decoding first
CONFIGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (PLAIN, ()),
    ("draft-mtp", ("draft-mtp",)),
    ("draft-simple", ("draft-simple",)),
    ("draft-eagle3", ("draft-eagle3",)),
    ("draft-dflash", ("draft-dflash",)),
    ("draft-dspark", ("draft-dspark",)),
    ("ngram-simple", ("ngram-simple",)),
    ("ngram-map-k", ("ngram-map-k",)),
    ("ngram-map-k4v", ("ngram-map-k4v",)),
    ("ngram-mod", ("ngram-mod",)),
    ("ngram-cache", ("ngram-cache",)),
    ("ngram-mod+draft-mtp", ("ngram-mod", "draft-mtp")),
    ("ngram-simple+draft-mtp", ("ngram-simple", "draft-mtp")),
)
# The strategies that draft with a draft model (upstream's -md, our draft_model); a configuration
# holds at most one (llama.cpp mixes n-gram strategies with at most one draft context)
DRAFT_MODEL_KINDS: tuple[str, ...] = (
    "draft-simple",
    "draft-eagle3",
    "draft-dflash",
    "draft-dspark",
)
# upstream's own draft length of ngram-cache (common/speculative.cpp, create_state_ngram_cache)
NGRAM_CACHE_DRAFT = 8
_TEST_VOCAB_CHUNK = 5
_TEST_VOCAB_CHARS = "abcdefghijklmnopqrstuvwxyz"


def hash_test_vocab(chunk: str, n_vocab: int) -> int:
    """The id llama.cpp's "test" vocabulary gives a chunk of text (llama-vocab.cpp)."""
    h = 0
    for byte in chunk.encode():
        h = (h * 31 + byte) % (1 << 64)
    return h % n_vocab


def text_for_test_vocab(ids: list[int], n_vocab: int) -> str:
    """A text of 5-letter chunks that the "test" vocabulary tokenizes to ``ids``."""
    first: dict[int, str] = {}  # (hash of a 4-letter prefix) * 31 mod n_vocab -> the prefix
    for letters in itertools.product(_TEST_VOCAB_CHARS, repeat=_TEST_VOCAB_CHUNK - 1):
        prefix = "".join(letters)
        first.setdefault(hash_test_vocab(prefix, n_vocab) * 31 % n_vocab, prefix)
    chunks = []
    for t in ids:
        for last in _TEST_VOCAB_CHARS:
            prefix_or_none = first.get((t - ord(last)) % n_vocab)
            if prefix_or_none is not None:
                chunks.append(prefix_or_none + last)
                break
        else:
            raise ValueError(
                f"no 5-letter chunk hashes to token {t} in a {n_vocab}-token vocabulary"
            )
    return "".join(chunks)


def strategy_options(
    kinds: tuple[str, ...], draft_max: int
) -> tuple[list[dict[str, Any]], list[str]]:
    """The same parameters both ways: our runtime's Strategy fields and upstream's flags.

    Upstream caps each n-gram strategy by its own m-gram length, not by --spec-draft-n-max, so
    both sides get m-gram length = draft max; ngram-simple drafts nothing when its m-gram is
    shorter than its n-gram, so the three n-gram-map strategies get n-gram length = draft max
    too; ngram-mod keeps its n-gram length (24) and gets n_max = draft max, n_min = 3/4 of it
    (upstream's 48/64); ngram-cache's draft length is upstream's fixed 8.
    """
    ours: list[dict[str, Any]] = []
    flags: list[str] = []
    for kind in kinds:
        if kind in ("ngram-simple", "ngram-map-k", "ngram-map-k4v"):
            ours.append({"kind": kind, "size_n": draft_max, "size_m": draft_max})
            flags += [
                f"--spec-{kind}-size-n",
                str(draft_max),
                f"--spec-{kind}-size-m",
                str(draft_max),
            ]
        elif kind == "ngram-mod":
            n_min = draft_max * 3 // 4
            ours.append({"kind": kind, "mod_n_max": draft_max, "mod_n_min": n_min})
            flags += [
                "--spec-ngram-mod-n-max",
                str(draft_max),
                "--spec-ngram-mod-n-min",
                str(n_min),
            ]
        else:
            ours.append({"kind": kind})
    return ours, flags


_STATS = re.compile(
    r"statistics\s+([\w-]+): #calls\(b,g,a\) =\s*\d+\s+(\d+)\s+\d+, #gen drafts =\s*(\d+), "
    r"#acc drafts =\s*(\d+), #gen tokens =\s*(\d+), #acc tokens =\s*(\d+)"
)


def parse_upstream_strategies(text: str) -> dict[str, dict[str, int]]:
    """Per-strategy counters from upstream's ``common_speculative_print_stats`` (trace level)."""
    return {
        m.group(1): {
            "draft_calls": int(m.group(2)),
            "drafts": int(m.group(3)),
            "accepted_drafts": int(m.group(4)),
            "drafted_tokens": int(m.group(5)),
            "accepted_tokens": int(m.group(6)),
        }
        for m in _STATS.finditer(text)
    }


def hex_pieces(tokens: list[int]) -> str:
    """What a "test" vocabulary prints for ``tokens``: each id in hex, no separator."""
    return "".join(f"{t:x}" for t in tokens)


@dataclass(frozen=True)
class Setup:
    runner: Runner
    upstream_bin: Path | None
    target: Path
    drafts: dict[str, Path]  # the draft model of each of DRAFT_MODEL_KINDS
    n_vocab: int
    n: int
    draft_max: int


def draft_model(setup: Setup, kinds: tuple[str, ...]) -> Path | None:
    """The draft model of the configuration's draft-model strategy; None when it has none."""
    used = [k for k in kinds if k in DRAFT_MODEL_KINDS]
    return setup.drafts[used[0]] if used else None


def run_ours(
    setup: Setup, kinds: tuple[str, ...], prompt: list[int], n: int
) -> tuple[ProcessRun, dict[str, Any]]:
    ours, _ = strategy_options(kinds, setup.draft_max)
    draft = draft_model(setup, kinds)
    spec = {
        "model": str(setup.target), "prompt": prompt, "n": n, "threads": setup.runner.threads,
        "n_ctx": setup.runner.n_ctx, "lib_dir": str(setup.runner.lib_dir),
        "draft_max": setup.draft_max, "strategies": ours, "warmup": True,
        "draft_model": str(draft) if draft is not None else None,
    }  # fmt: skip
    cmd = [sys.executable, "-m", "bench.py_speculate", json.dumps(spec)]
    env = {"PYTHONPATH": f"{setup.runner.bindings}:{setup.runner.repo}"}
    r = run_measured(cmd, env)
    if r.returncode != 0:
        raise RuntimeError(f"runtime ({'+'.join(kinds) or PLAIN}) failed:\n{r.stderr[-2000:]}")
    fig = json_line(r)
    fig["per_strategy"] = {s["kind"]: s for s in fig.pop("strategies")}
    return r, fig


def upstream_command(setup: Setup, kinds: tuple[str, ...], text: str, n: int) -> list[str]:
    assert setup.upstream_bin is not None
    _, flags = strategy_options(kinds, setup.draft_max)
    t = str(setup.runner.threads)
    cmd = [
        str(setup.upstream_bin / "llama-speculative-simple"), "-m", str(setup.target), "-p", text,
        "-n", str(n), "-t", t, "-tb", t, "-c", str(setup.runner.n_ctx),
        "--spec-type", ",".join(kinds), "--spec-draft-n-max", str(setup.draft_max), *flags,
        "--top-k", "1", "--samplers", "top_k",
        # trace level: per-strategy statistics at the end (no trace line in the decode loop)
        "-lv", "4",
    ]  # fmt: skip
    draft = draft_model(setup, kinds)
    if draft is not None:
        cmd += ["-md", str(draft)]
    return cmd


def run_upstream(
    setup: Setup, kinds: tuple[str, ...], prompt: list[int], text: str, tries: int = 3
) -> tuple[ProcessRun | None, dict[str, Any]]:
    """Upstream's driver; ``(None, {"not_run": reason})`` when it fails or never prints its
    statistics (its logger is asynchronous; a run without them is run again, counted)."""
    assert setup.upstream_bin is not None
    cmd = upstream_command(setup, kinds, text, setup.n)
    # our libllama and ggml first, as in section 4
    env = {"LD_LIBRARY_PATH": f"{setup.runner.lib_dir}:{setup.upstream_bin}"}
    for attempt in range(tries):
        r = run_measured(cmd, env)
        out = r.stdout + r.stderr
        if r.returncode != 0:
            tail = " | ".join(line for line in out.strip().splitlines()[-6:] if line.strip())
            return None, {"not_run": f"llama-speculative-simple exited with {r.returncode}: {tail}"}
        try:
            fig: dict[str, Any] = dict(parse_upstream(out))
        except RuntimeError:
            log(f"llama-speculative-simple ({','.join(kinds)}) printed no statistics; again")
            continue
        fig["reruns"] = attempt
        fig["per_strategy"] = parse_upstream_strategies(out)
        # every step asks the first strategy for a draft: its draft calls are the steps
        first = _STATS.search(out)
        fig["steps"] = int(first.group(2)) if first else None
        fig["echo_ok"] = hex_pieces(prompt) in r.stdout
        fig["stdout"] = r.stdout
        return r, fig
    return None, {"not_run": f"llama-speculative-simple printed no statistics in {tries} runs"}


@dataclass
class Collected:
    """Every run of one prompt: figures per run name (``ours_X`` / ``upstream_X``)."""

    runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    not_run: dict[str, str] = field(default_factory=dict)
    upstream_count: dict[str, int] = field(default_factory=dict)
    reruns: int = 0

    def add(self, name: str, fig: dict[str, Any]) -> None:
        self.runs.setdefault(name, []).append(fig)


def _same_as_plain(tokens: list[int], plain: list[int], n: int) -> bool:
    return len(tokens) >= n and tokens == plain[: len(tokens)]


def _one_config(
    setup: Setup, prompt: list[int], text: str, c: Collected, name: str, kinds: tuple[str, ...],
    plain: list[int], ours_first: bool,
) -> None:  # fmt: skip
    """Upstream's run and ours of one configuration (ours first when ``ours_first``)."""
    sides = ["ours", "upstream"] if ours_first else ["upstream", "ours"]
    for side in sides:
        run_name = f"{side}_{name}"
        if run_name in c.not_run:
            continue
        if side == "upstream":
            if setup.upstream_bin is None:
                continue
            r, fig = run_upstream(setup, kinds, prompt, text)
            if r is None:
                c.not_run[run_name] = fig["not_run"]
                log(f"strategies: {run_name} not run: {fig['not_run']}")
                continue
            c.reruns += fig.pop("reruns")
            stdout = fig.pop("stdout")
            count = int(fig["generated_tokens"])
            c.upstream_count.setdefault(name, count)
            fig["same_as_plain"] = count >= setup.n and hex_pieces(prompt + plain[:count]) in stdout
        else:
            # as many tokens as upstream decoded with this configuration, as in section 4
            r, fig = run_ours(setup, kinds, prompt, c.upstream_count.get(name, setup.n))
            fig["same_as_plain"] = _same_as_plain(fig.pop("tokens"), plain, setup.n)
        fig["peak_rss_mb"] = r.peak_rss_mb
        c.add(run_name, fig)
        log(
            f"strategies {run_name}: {fig['tokens_per_second']:.1f} tok/s, drafted "
            f"{fig['drafted_tokens']:.0f}, accepted {fig['accepted_tokens']:.0f}"
        )


def collect(setup: Setup, repeats: int) -> dict[str, Collected]:
    """Every configuration on every prompt, ``repeats`` times, interleaved: per repeat and prompt,
    plain first, then per configuration upstream and ours (ours first in every other repeat)."""
    collected = {p: Collected() for p in PROMPTS}
    texts = {p: text_for_test_vocab(ids, setup.n_vocab) for p, ids in PROMPTS.items()}
    # plain runs long enough to check every speculative run (upstream stops a little past n)
    n_plain = setup.n + setup.draft_max + 1
    for i in range(repeats):
        for prompt_name, prompt in PROMPTS.items():
            c = collected[prompt_name]
            log(f"strategies: repeat {i + 1}/{repeats}, {prompt_name} prompt")
            r, fig = run_ours(setup, (), prompt, n_plain)
            plain = fig.pop("tokens")
            fig["same_as_plain"] = True
            fig["peak_rss_mb"] = r.peak_rss_mb
            c.add(f"ours_{PLAIN}", fig)
            log(f"strategies ours_{PLAIN}: {fig['tokens_per_second']:.1f} tok/s")
            for name, kinds in CONFIGS:
                if kinds:
                    _one_config(
                        setup, prompt, texts[prompt_name], c, name, kinds, plain, i % 2 == 1
                    )
    return collected


BEST_TARGET = 1.2  # repetitive prompt: our best configuration / upstream's draft-mtp alone
EACH_TARGET = 1.0  # ours / upstream, each identical configuration


def _series(figs: list[dict[str, Any]], key: str, unit: str) -> Series:
    return Series(unit, [float(f[key]) for f in figs])


def _acceptance(figs: list[dict[str, Any]]) -> Series:
    """accepted / drafted per run that drafted anything."""
    return Series(
        "accepted/drafted",
        [f["accepted_tokens"] / f["drafted_tokens"] for f in figs if f["drafted_tokens"]],
    )


def _per_strategy(figs: list[dict[str, Any]]) -> dict[str, Any]:
    kinds = dict.fromkeys(k for f in figs for k in f.get("per_strategy", {}))
    out: dict[str, Any] = {}
    for kind in kinds:
        rows = [f["per_strategy"][kind] for f in figs if kind in f.get("per_strategy", {})]
        out[kind] = {
            "drafted_tokens": _series(rows, "drafted_tokens", "tokens").summary(),
            "accepted_tokens": _series(rows, "accepted_tokens", "tokens").summary(),
            "acceptance": _acceptance(rows).summary(),
        }
    return out


def summarise_prompt(c: Collected) -> dict[str, Any]:
    """One prompt's figures: medians with spread, per-repeat ratios, checks and not-run reasons."""
    tps = {name: _series(figs, "tokens_per_second", "tokens/s") for name, figs in c.runs.items()}
    base = tps[f"ours_{PLAIN}"]
    echoes = [x["echo_ok"] for k, f in c.runs.items() if k.startswith("upstream_") for x in f]
    ours_over_upstream = {
        name: ratio_series(tps[f"ours_{name}"], tps[f"upstream_{name}"]).summary()
        for name, _ in CONFIGS
        if f"ours_{name}" in tps and f"upstream_{name}" in tps
    }
    return {
        "tokens_per_second": {k: s.summary() for k, s in tps.items()},
        "speedup_vs_ours_plain": {
            k: ratio_series(s, base).summary() for k, s in tps.items() if k != f"ours_{PLAIN}"
        },
        "ours_over_upstream": ours_over_upstream,
        "acceptance": {
            k: _acceptance(f).summary() for k, f in c.runs.items() if k != f"ours_{PLAIN}"
        },
        "drafted_tokens": {
            k: _series(f, "drafted_tokens", "tokens").summary()
            for k, f in c.runs.items()
            if k != f"ours_{PLAIN}"
        },
        "generated_tokens": {
            k: _series(f, "generated_tokens", "tokens").summary() for k, f in c.runs.items()
        },
        # target decode steps after the prompt (upstream: its first strategy's draft calls)
        "steps": {
            k: Series(
                "steps", [float(x["steps"]) for x in f if x.get("steps") is not None]
            ).summary()
            for k, f in c.runs.items()
        },
        "per_strategy": {k: _per_strategy(f) for k, f in c.runs.items() if k != f"ours_{PLAIN}"},
        "peak_rss_mb": {k: _series(f, "peak_rss_mb", "MB").summary() for k, f in c.runs.items()},
        "output_equals_plain": {
            k: all(x["same_as_plain"] for x in f) for k, f in c.runs.items() if k != f"ours_{PLAIN}"
        },
        # None: no upstream run
        "upstream_prompt_echo_matches": all(echoes) if echoes else None,
        "not_run": dict(c.not_run),
        "upstream_generated_tokens": dict(c.upstream_count),
        "upstream_reruns_missing_statistics": c.reruns,
    }


def targets(prompts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The two targets, met or not by the median of the per-repeat ratio (figures beside it)."""
    rep = prompts["repetitive"]
    tps = rep["tokens_per_second"]
    ours = {k: v for k, v in tps.items() if k.startswith("ours_") and k != f"ours_{PLAIN}"}
    best: dict[str, Any] = {"target": BEST_TARGET, "met": None}
    if ours and "upstream_draft-mtp" in tps:
        name = max(ours, key=lambda k: ours[k]["median"])
        ratio = ratio_series(
            Series("tokens/s", ours[name]["values"]),
            Series("tokens/s", tps["upstream_draft-mtp"]["values"]),
        ).summary()
        best.update(configuration=name, ratio=ratio, met=ratio["median"] >= BEST_TARGET)
    else:
        best["reason"] = "upstream's draft-mtp alone did not run"
    each: dict[str, Any] = {"target": EACH_TARGET, "met": {}, "not_run": {}}
    for prompt, d in prompts.items():
        for name, ratio in d["ours_over_upstream"].items():
            each["met"][f"{prompt}:{name}"] = ratio["median"] >= EACH_TARGET
        for run_name, reason in d["not_run"].items():
            each["not_run"][f"{prompt}:{run_name}"] = reason
    each["all_met"] = (
        None  # nothing compared (--no-upstream)
        if not each["met"] and not each["not_run"]
        else all(each["met"].values()) and not each["not_run"]
    )
    return {"best_over_upstream_draft_mtp": best, "ours_over_upstream_each": each}


def method(setup: Setup, repeats: int) -> str:
    return (
        f"greedy generation of {setup.n} tokens, {setup.runner.threads} thread(s), n_ctx "
        f"{setup.runner.n_ctx}, draft max {setup.draft_max}, a fresh process per run, {repeats} "
        "repeat(s); per repeat and prompt: ours plain, then per configuration upstream and ours "
        "(ours first in every other repeat). Prompts: 'repetitive' = ids 100..399 then "
        "100..110 (311 tokens; the trunk predicts t -> t+1, so the continuation repeats the "
        "prompt and n-gram drafts are right), 'non_repetitive' = ids 100..110 (nothing repeats: "
        "n-gram strategies find no draft). Ours: llama_bindings.runtime with "
        "SpeculativeDecoding(strategies=..., draft_token_max=D[, draft_model=...]), tokens/s from "
        "its metrics (prompt excluded), after a 2-token warm-up generation on another context with "
        "the same options (closed first: a strategy's state, ngram-map-k's map for one, lives as "
        "long as its context and would carry the warm-up into the timed run). "
        "Upstream: llama-speculative-simple --spec-type <the same list, comma separated> "
        "--spec-draft-n-max D [-md draft] --top-k 1 --samplers top_k -lv 4 (trace level, for its "
        "per-strategy statistics), tokens/s from its 'decoded N tokens in T seconds' line, on "
        "the same libllama and ggml (LD_LIBRARY_PATH); its prompt is a text that the models' "
        "'test' vocabulary tokenizes to the same ids (checked in its echo). Same n-gram "
        "parameters both sides: ngram-simple/map-k/map-k4v n-gram and m-gram length D (upstream "
        "caps n-gram drafts by their m-gram length, not by the draft max; ngram-simple drafts "
        "nothing when m < n), ngram-mod n_match 24 (default), n_max D, n_min 3D/4, ngram-cache "
        f"upstream's fixed draft length {NGRAM_CACHE_DRAFT} (capped by D on our side). "
        "Draft models (upstream's -md, our draft_model=): draft-simple's the plain kind (no MTP "
        "head, same trunk rule and vocabulary) with 2 layers; draft-eagle3's, draft-dflash's and "
        "draft-dspark's the agreeing test drafts of generator/testdrafts.py for the target (one "
        "layer, f32; they read the target's layer inputs and share its token embeddings and "
        "output head): EAGLE-3 drafts up to D tokens one at a time, DFlash's block size is 2 "
        "(upstream clamps its draft length to 1), DSpark's 4 (a whole block of 4 per draft). "
        "Ours generates as many tokens as upstream decoded with the "
        "same configuration (upstream stops one step past N); every run's greedy output is "
        "checked against ours plain (which runs N + D + 1 tokens): for upstream in its printed "
        "text. Acceptance = accepted / drafted over runs that drafted; per strategy from "
        "GenerationMetrics.strategies and upstream's statistics "
        "lines. A configuration upstream cannot run is not-run with its reason, never a number. "
        "Targets (measured, not asserted): repetitive prompt, our best configuration >= "
        f"{BEST_TARGET}x upstream's draft-mtp alone; ours >= {EACH_TARGET}x upstream for each "
        "identical configuration; met = the median of the per-repeat ratio."
    )


def run(setup: Setup, repeats: int) -> dict[str, Any]:
    collected = collect(setup, repeats)
    prompts = {p: summarise_prompt(c) for p, c in collected.items()}
    return {
        "method": method(setup, repeats),
        "models": {
            "target": setup.target.name,
            "drafts": {kind: path.name for kind, path in setup.drafts.items()},
        },
        "draft_max": setup.draft_max,
        "tokens": setup.n,
        # lists: the JSON is written with sorted keys, these keep the order of the report
        "configurations": [[name, list(kinds)] for name, kinds in CONFIGS],
        "prompt_order": list(PROMPTS),
        "prompts": prompts,
        "targets": targets(prompts),
    }
