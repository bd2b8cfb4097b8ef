"""Section "chat": a multi-turn chat on a real model (Gemma 3 270M Q4_K_M, the ``gemma`` chat
format named on both sides: its GGUF has no chat template), our runtime vs llama-cpp-python
0.3.36's ``Llama`` on the same libraries, each side with its own defaults: a long system prompt,
4 questions, greedy replies of at most ``max_tokens`` tokens, each reply appended to that side's
messages for the next turn. Ours keeps the conversation's prefix in its context by default
(``reuse_prefix``); ``reuse_prefix=False``, the old default, is measured for reference. The
same chat with n-gram speculation: ours ngram-simple, theirs prompt-lookup decoding.

Each run is a process of its own (``bench.chat_worker``); per repeat every configuration runs
once, each of ours beside its counterpart of theirs, ours first in every other repeat; ratios are
taken per repeat. llama-cpp-python runs from its ``llama_cpp/`` package extracted from the cached
sdist, with ``LLAMA_CPP_LIB_PATH`` at our libraries (as in the realmodel section); when it is
missing or does not import, the section says so and measures ours only.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.calls import extract_llama_cpp_package
from bench.realmodel import _theirs_env
from bench.stats import Series, log, ratio_series, run_measured

# A system prompt of several hundred tokens (451 with Gemma 3's tokenizer), and questions whose
# answers are in it (an n-gram lookup has text to copy).
SYSTEM = (
    "You are the visitor assistant of the Gull Point Lighthouse Museum. Answer the visitor's "
    "question in one or two short sentences, using only the facts below, and repeat the facts "
    "in the words they are written in.\n\n"
    "Opening hours: the museum is open from Tuesday to Sunday, from ten in the morning to five "
    "in the afternoon, and it is closed on Mondays and on the first of January. In July and "
    "August it stays open until seven in the evening.\n"
    "Tickets: an adult ticket costs eight pounds, a child ticket costs four pounds, children "
    "under five go free, and a family ticket for two adults and three children costs twenty "
    "pounds. Tickets are sold at the keeper's cottage, by card or in cash.\n"
    "The tower: the lighthouse tower is thirty-one metres high and has one hundred and twelve "
    "steps. Visitors climb the tower in groups of ten, every half hour, with a guide. The lamp "
    "room at the top holds the great lens, which was made in Paris in 1872 and weighs three "
    "tonnes.\n"
    "History: the light was first lit in 1874, it was kept by the Quill family for three "
    "generations, it went dark in 1981 when the light was automated, and it was restored by Mara "
    "Quill and the harbour board between 1992 and 1998.\n"
    "Getting there: the museum is at the end of Gull Point Road, two miles from the village. "
    "The number 14 bus stops at the gate every hour. There is a small car park beside the "
    "cottage, which costs two pounds for the day. The path from the car park to the tower is "
    "steep and not suitable for wheelchairs.\n"
    "Food: the cafe in the keeper's cottage serves tea, coffee, sandwiches and cakes from ten "
    "until half past four. Picnics are welcome on the lawn, but not inside the tower.\n"
    "Dogs: dogs on a lead are welcome in the grounds and in the cafe, but not in the tower.\n"
    "Events: on the last Saturday of every month the lamp is lit at sunset and the tower stays "
    "open until nine in the evening; these evening visits must be booked in advance at the "
    "cottage or by telephone."
)
QUESTIONS = (
    "When is the museum open?",
    "How much does a family ticket cost, and where can I buy it?",
    "Can I bring my dog up the tower?",
    "How do I get there by bus, and is there a car park?",
)
WARMUP = "Hello"
DRAFT_MAX = 8
N_CTX = 1024  # the chat's last prompt is 679 tokens, plus a reply of at most 48
DEFAULT = "ours_default"


@dataclass(frozen=True)
class Config:
    """One run kind: its name, side, prefix reuse (ours; theirs always keeps its prefix),
    speculative options (None: plain decoding) and flash attention (ours; None: the default)."""

    name: str
    side: str  # "ours" or "theirs"
    reuse_prefix: bool
    speculative: dict[str, Any] | None
    flash_attn: str | None = None


OURS_DEFAULT = Config(DEFAULT, "ours", True, None)
OURS_NO_REUSE = Config("ours_no-reuse", "ours", False, None)
THEIRS_DEFAULT = Config("theirs_default", "theirs", True, None)
# a diagnostic: ours with theirs' flash attention setting (off), to tell numerics from the rest
OURS_FLASH_OFF = Config("ours_flash-off", "ours", True, None, "off")
OURS_NGRAM = Config(
    "ours_ngram-simple",
    "ours",
    True,
    {"strategies": [{"kind": "ngram-simple", "size_n": 3, "size_m": 8}], "draft_max": DRAFT_MAX},
)
# n-gram of at most 3 tokens (theirs falls back to 2 and 1), drafts of 8
THEIRS_LOOKUP = Config(
    "theirs_prompt-lookup", "theirs", True, {"max_ngram_size": 3, "num_pred_tokens": DRAFT_MAX}
)
# Pairs (ours, theirs), compared with each other; a configuration in two pairs runs once a repeat.
PAIRS: tuple[tuple[Config, Config], ...] = (
    (OURS_DEFAULT, THEIRS_DEFAULT),
    (OURS_NO_REUSE, THEIRS_DEFAULT),
    (OURS_FLASH_OFF, THEIRS_DEFAULT),
    (OURS_NGRAM, THEIRS_LOOKUP),
)
# Speed-ups within one side: (configuration, its reference)
OWN: tuple[tuple[str, str], ...] = (
    (DEFAULT, OURS_NO_REUSE.name),
    (OURS_FLASH_OFF.name, DEFAULT),
    (OURS_NGRAM.name, DEFAULT),
    (THEIRS_LOOKUP.name, THEIRS_DEFAULT.name),
)


@dataclass(frozen=True)
class Setup:
    repo: Path
    bindings: Path  # the folder holding the llama_bindings package that fits lib_dir
    lib_dir: Path
    model: Path
    max_tokens: int
    n_ctx: int
    threads: int


def run_one(setup: Setup, config: Config, env: dict[str, str]) -> dict[str, Any]:
    spec = {
        "side": config.side, "model": str(setup.model), "lib_dir": str(setup.lib_dir),
        "n_ctx": setup.n_ctx, "threads": setup.threads, "max_tokens": setup.max_tokens,
        "system": SYSTEM, "questions": list(QUESTIONS), "warmup": WARMUP,
        "reuse_prefix": config.reuse_prefix, "speculative": config.speculative,
        "flash_attn": config.flash_attn,
    }  # fmt: skip
    path = f"{setup.bindings}:{setup.repo}"
    if "PYTHONPATH" in env:
        path += f":{env['PYTHONPATH']}"
    r = run_measured(
        [sys.executable, "-m", "bench.chat_worker", json.dumps(spec)],
        {**env, "PYTHONPATH": path},
    )
    if r.returncode != 0:
        raise RuntimeError(f"chat {config.name} failed:\n{r.stderr[-2000:]}")
    fig: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    fig["peak_rss_mb"] = r.peak_rss_mb
    return fig


def collect(
    setup: Setup, repeats: int, theirs: dict[str, str] | None
) -> dict[str, list[dict[str, Any]]]:
    """Run name -> one figure dict per repeat."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for i in range(repeats):
        log(f"chat: repeat {i + 1}/{repeats}")
        done: set[str] = set()
        for pair in PAIRS:
            for config in pair if i % 2 == 0 else pair[::-1]:
                if config.name in done or (config.side == "theirs" and theirs is None):
                    continue
                done.add(config.name)
                fig = run_one(setup, config, theirs or {})
                runs.setdefault(config.name, []).append(fig)
                decoded = [t["decoded_prompt_tokens"] for t in fig["turns"]]
                log(
                    f"chat {config.name}: {fig['total_seconds']:.2f} s, prompt tokens decoded "
                    f"per turn {decoded}"
                )
    return runs


def _per_turn(figs: list[dict[str, Any]], key: str, unit: str) -> list[dict[str, Any]]:
    """One summary per turn of ``key`` over the repeats."""
    turns = len(figs[0]["turns"])
    return [Series(unit, [float(f["turns"][t][key]) for f in figs]).summary() for t in range(turns)]


def _total(figs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The chat's sum of a per-turn count, over the repeats."""
    return Series("count", [float(sum(t[key] for t in f["turns"])) for f in figs]).summary()


def _reuse_kinds(figs: list[dict[str, Any]]) -> list[list[str]]:
    """Per turn, the ``prompt_reuse`` values seen over the repeats (ours; theirs: "-")."""
    turns = range(len(figs[0]["turns"]))
    return [sorted({f["turns"][t].get("prompt_reuse", "-") for f in figs}) for t in turns]


def _replies(fig: dict[str, Any]) -> list[str]:
    return [t["text"] for t in fig["turns"]]


def _equal_replies(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[bool]:
    """Per repeat: every reply of one run equals the other's, turn for turn."""
    return [_replies(x) == _replies(y) for x, y in zip(a, b, strict=False)]


def _first_difference(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any] | None:
    """The first turn whose replies differ, and how many characters they share before it."""
    for turn, (x, y) in enumerate(zip(_replies(a), _replies(b), strict=True)):
        if x != y:
            common = next(
                (i for i, (c, d) in enumerate(zip(x, y, strict=False)) if c != d),
                min(len(x), len(y)),
            )
            return {"turn": turn + 1, "common_characters": common, "a": x, "b": y}
    return None


def _pair_summary(
    runs: dict[str, list[dict[str, Any]]], total: dict[str, Series], o: str, t: str
) -> dict[str, Any]:
    first_prompts = zip(runs[o][0]["prompts"], runs[t][0]["prompts"], strict=True)
    return {
        # the whole chat: theirs' time / ours, higher: ours faster
        "chat_speed": ratio_series(total[t], total[o]).summary(),
        "replies_equal": _equal_replies(runs[o], runs[t]),
        "first_difference": _first_difference(runs[o][0], runs[t][0]),
        # first repeat: the same prompt ids at each turn (after a reply that differs, they do not)
        "prompt_ids_equal_per_turn": [x == y for x, y in first_prompts],
    }


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    total = {n: Series("s", [f["total_seconds"] for f in figs]) for n, figs in runs.items()}
    compared = [(o.name, t.name) for o, t in PAIRS if o.name in runs and t.name in runs]
    return {
        "total_seconds": {n: s.summary() for n, s in total.items()},
        "turn_seconds": {n: _per_turn(f, "seconds", "s") for n, f in runs.items()},
        "prompt_tokens": {n: _per_turn(f, "prompt_tokens", "tokens") for n, f in runs.items()},
        "decoded_prompt_tokens": {
            n: _per_turn(f, "decoded_prompt_tokens", "tokens") for n, f in runs.items()
        },
        "reused_prompt_tokens": {
            n: _per_turn(f, "reused_prompt_tokens", "tokens") for n, f in runs.items()
        },
        "prompt_reuse": {n: _reuse_kinds(f) for n, f in runs.items()},
        "generated_tokens": {
            n: _per_turn(f, "generated_tokens", "tokens") for n, f in runs.items()
        },
        "steps": {n: _total(f, "steps") for n, f in runs.items()},
        "drafted_tokens": {n: _total(f, "drafted_tokens") for n, f in runs.items()},
        "peak_rss_mb": {
            n: Series("MB", [f["peak_rss_mb"] for f in figs]).summary() for n, figs in runs.items()
        },
        "ours_over_theirs": {f"{o}/{t}": _pair_summary(runs, total, o, t) for o, t in compared},
        # the whole chat: the reference's time / the configuration's, higher: faster
        "speedup_vs_own": {
            f"{n}/{ref}": ratio_series(total[ref], total[n]).summary()
            for n, ref in OWN
            if n in total and ref in total
        },
        "replies_equal_ours_default": {
            n: _equal_replies(f, runs[DEFAULT]) for n, f in runs.items()
        },
        # a run's replies are the same in every repeat (greedy, same libraries)
        "replies_stable": {
            n: all(_replies(x) == _replies(f[0]) for x in f) for n, f in runs.items()
        },
        "finish_reasons": {
            n: sorted({t["finish_reason"] for fig in f for t in fig["turns"]})
            for n, f in runs.items()
        },
        "replies": {n: _replies(f[0]) for n, f in runs.items()},
        "settings": {n: figs[0]["settings"] for n, figs in runs.items()},
    }


def method(setup: Setup, repeats: int) -> str:
    return (
        f"Gemma 3 270M Q4_K_M (`{setup.model.name}`), a {len(QUESTIONS)}-turn chat: a system "
        f"prompt of several hundred tokens (the first prompt is about 466 tokens), "
        f"{len(QUESTIONS)} questions, greedy replies of at most {setup.max_tokens} tokens, each "
        "side appending its own reply to its messages for the next turn, one context (one "
        f"`Llama`) for the whole chat; n_ctx {setup.n_ctx} and n_threads = n_threads_batch = "
        f"{setup.threads} on both sides, every other setting each side's own default (ours: "
        "n_batch = n_ubatch 512, flash_attn auto, which llama.cpp resolves to enabled here; "
        "theirs: n_batch = n_ubatch 512, flash attention off), the same libllama and ggml "
        "(ours: `Model(lib_dir=...)`; theirs: LLAMA_CPP_LIB_PATH). A fresh process per run, "
        f"{repeats} repeat(s); per repeat each pair runs side by side (ours first in every other "
        f"repeat); ratios per repeat. Each process first generates 2 tokens after {WARMUP!r} "
        "(untimed; ours on a context of its own, theirs then `Llama.reset()`). Ours: "
        f"`Context(model, n_ctx={setup.n_ctx}, n_threads=1, n_threads_batch=1)` and "
        f"`ctx.chat(messages, template='gemma', max_tokens={setup.max_tokens})` (default "
        "sampling: greedy; reuse_prefix on by default: the context keeps the longest common "
        "prefix of what it holds and the new prompt); ours_no-reuse: the same with "
        "`reuse_prefix=False` (the context cleared every turn, the old default); "
        "ours_flash-off, a diagnostic: the default with `flash_attn='off'`, theirs' setting; "
        "ours_ngram-simple: `speculative=SpeculativeDecoding(strategies=(Strategy("
        f"'ngram-simple', size_n=3, size_m=8),), draft_token_max={DRAFT_MAX})`. Theirs: "
        "llama-cpp-python 0.3.36 `Llama(model_path, chat_format='gemma', n_threads=1, "
        f"n_threads_batch=1, n_ctx={setup.n_ctx}, verbose=False)` and "
        f"`create_chat_completion(messages, max_tokens={setup.max_tokens}, temperature=0.0)` "
        "(its `generate` keeps the longest common prefix too); theirs_prompt-lookup: with "
        f"`draft_model=LlamaPromptLookupDecoding(max_ngram_size=3, num_pred_tokens={DRAFT_MAX})`"
        " and `logits_all=True`: a draft model makes it compute and copy every row's logits, "
        "the prompt's included, but it sizes the array it copies them into by the logits_all "
        "argument (n_batch rows unless True), so without it the chat fails in `Llama.eval` once "
        "it passes 512 tokens (numpy cannot broadcast); with it the array has n_ctx rows. Its "
        "`gemma` format drops system messages; llama.cpp's `gemma` template (ours) writes the "
        "system prompt at the start of the first user turn followed by a blank line, so theirs' "
        "first user message is written that way: both sides' first prompts are the same ids "
        "(compared per turn). Timed: the whole chat, from the first turn's call to the last "
        "turn's return (chat_speed = theirs' time / ours, per repeat), and each turn. Prompt "
        "tokens decoded per turn: ours `GenerationMetrics.decoded_prompt_tokens` (prompt_tokens "
        "- reused_prompt_tokens; `prompt_reuse` says how); theirs the size of the first "
        "`Llama.eval` of each `Llama.generate` call (wrapped on the instance), the prompt's "
        "suffix after the prefix it kept (every later eval is one step: the last token and a "
        "draft). Replies compared as text, turn for turn, per repeat, and reported, not asserted."
    )


def run(setup: Setup, cache: Path, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-chat-") as tmp:
        try:
            package: Path | None = extract_llama_cpp_package(cache, Path(tmp))
        except FileNotFoundError:
            package = None
        env = _theirs_env(package, setup.lib_dir)
        unavailable = env if isinstance(env, str) else None
        if unavailable:
            log(f"chat: llama-cpp-python unavailable, measuring ours only ({unavailable})")
        started = time.perf_counter()
        runs = collect(setup, repeats, None if isinstance(env, str) else env)
        wall = time.perf_counter() - started
    return {
        "method": method(setup, repeats),
        "model": setup.model.name,
        "peer": None if unavailable else "llama-cpp-python 0.3.36",
        "peer_unavailable": unavailable,
        # the machine is shared: how long the section took, and the load when it ended
        "wall_seconds": wall,
        "cpu_count": os.cpu_count(),
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "max_tokens": setup.max_tokens,
        "n_ctx": setup.n_ctx,
        "draft_max": DRAFT_MAX,
        "system": SYSTEM,
        "questions": list(QUESTIONS),
        "pairs": [[o.name, t.name] for o, t in PAIRS],
        "configurations": {c.name: asdict(c) for pair in PAIRS for c in pair},
        **summarise(runs),
    }
