"""Our runtime against llama.cpp's own example programs on a real model, token for token.

Both sides run the same libllama and ggml (the host build; see generator.verify.upstream_drivers),
the same Gemma 3 270M file, greedy sampling, flash attention as llama.cpp chooses (auto: on for
the CPU), the same context and batch sizes and the same thread counts, so the drivers' schedules
are the only difference left; each test makes ours the same as the upstream program's:

* plain: llama-simple decodes the whole prompt in one batch, then one token per decode, greedy;
  so does ``Context.generate`` without speculation. It sets no thread count (llama.cpp's default,
  4) and has no options for one: ours gets 4 too.
* speculative: llama-speculative-simple decodes all but the last prompt token, then every step
  decodes [last token, draft...] and keeps the matching prefix plus one token; so does the
  runtime's speculative path (the llama_mtp wrapper). Its n-gram drafts are not capped by
  --spec-draft-n-max, only by the m-gram length, so ours gets ``draft_token_max`` = the m-gram
  length. Two differences at the end of a generation are upstream's: it drafts while fewer than
  -n tokens are out, and its last draft is not capped at all (``n_max`` 0 means unlimited in
  common_speculative_draft), so it prints more than -n tokens; the step that starts one token
  before the limit drafts there and not here. Its debug log (-lv 5) names every step's draft
  and accepted length: the steps that start earlier are the shared ones, and on those the
  drafted and accepted counts and every token must be equal.

The printed texts are compared: each program prints the prompt's pieces and then the generated
pieces (special tokens rendered), and ours are rendered the same way from the token ids.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from generator.verify.upstream_drivers import UpstreamDrivers

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

STORY = "Once upon a time, in a small village by the sea, there lived"
# A copy edit: the model repeats the prompt's text, so n-gram strategies draft a lot.
COPY_EDIT = (
    "Correct the spelling in the following text.\n\n"
    "Text: The quick brown fox jumpd over the lazy dog. The dog did not wake up, and the fox ran "
    "into the forrest to find its family.\n"
    "Corrected: The quick brown fox jumped over the lazy dog. The dog did not wake up, and the fox "
    "ran into the forest to find its family.\n\n"
    "Text: Every morning the baker opens his shop at six, and the smell of fresh bred fills the "
    "streat. Children stop on their way to scool to buy a warm roll.\n"
    "Corrected:"
)
PROMPTS = {"story": STORY, "copy-edit": COPY_EDIT}
N_PREDICT = 48
N_CTX = 2048
N_BATCH = 512
SIMPLE_THREADS = 4  # llama-simple's, llama.cpp's default (GGML_DEFAULT_N_THREADS)
THREADS = 2
M_GRAM = 8
# Strategy parameters: (ours, llama-speculative-simple's options).
STRATEGIES: dict[str, tuple[dict[str, int], list[str]]] = {
    "ngram-simple": (
        {"size_n": 3, "size_m": M_GRAM},
        ["--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", str(M_GRAM)],
    ),
    "ngram-map-k": (
        {"size_n": 3, "size_m": M_GRAM, "min_hits": 1},
        ["--spec-ngram-map-k-size-n", "3", "--spec-ngram-map-k-size-m", str(M_GRAM),
         "--spec-ngram-map-k-min-hits", "1"],
    ),
    "ngram-map-k4v": (
        {"size_n": 3, "size_m": M_GRAM, "min_hits": 1},
        ["--spec-ngram-map-k4v-size-n", "3", "--spec-ngram-map-k4v-size-m", str(M_GRAM),
         "--spec-ngram-map-k4v-min-hits", "1"],
    ),
    "ngram-mod": (
        {"n_match": 4, "mod_n_min": 2, "mod_n_max": M_GRAM},
        ["--spec-ngram-mod-n-match", "4", "--spec-ngram-mod-n-min", "2",
         "--spec-ngram-mod-n-max", str(M_GRAM)],
    ),
}  # fmt: skip
MIXES = [[kind] for kind in STRATEGIES] + [["ngram-simple", "ngram-mod"]]
_STEP = re.compile(r"accepted (\d+)/(\d+) draft tokens")


def _pieces(model: Any, tokens: list[int]) -> str:
    """The text a llama.cpp example prints for ``tokens`` (special tokens rendered)."""
    ffi, llama = model.ffi, model.llama
    out = b""
    buf = ffi.new("char[]", 256)
    for token in tokens:
        n = int(llama.llama_token_to_piece(model.vocab, token, buf, 256, 0, True))
        assert n >= 0, f"token {token} has no piece"
        out += bytes(ffi.buffer(buf, n))
    return out.decode("utf-8", errors="replace")


def _generated(model: Any, result: Any) -> list[int]:
    """The generated tokens an example prints: it stops before an end-of-generation token."""
    tokens = list(result.tokens)
    if tokens and model.is_end_of_generation(tokens[-1]):
        tokens.pop()
    return tokens


def _ran(proc: Any, name: str) -> str:
    assert proc.returncode == 0, f"{name} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    return str(proc.stdout)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_plain_generation_equals_llama_simple(
    runtime: Any, gemma: Any, gemma_model: Path, upstream: UpstreamDrivers, prompt: str
) -> None:
    text = PROMPTS[prompt]
    tokens = gemma.tokenize(text, parse_special=True)  # as llama-simple tokenizes
    with runtime.Context(gemma, n_ctx=N_CTX, n_batch=N_BATCH, n_threads=SIMPLE_THREADS) as ctx:
        ours = ctx.generate(tokens, max_tokens=N_PREDICT)
    args = ["-m", str(gemma_model), "-n", str(N_PREDICT), text]
    printed = _ran(upstream.run("llama-simple", args), "llama-simple")
    assert printed.removesuffix("\n") == _pieces(gemma, tokens + _generated(gemma, ours))


def _speculative_args(model: Path, text: str, kinds: list[str]) -> list[str]:
    args = ["-m", str(model), "-p", text, "-n", str(N_PREDICT), "--temp", "0", "--top-k", "1",
            "-t", str(THREADS), "-tb", str(THREADS), "-c", str(N_CTX), "-b", str(N_BATCH),
            "-ub", str(N_BATCH), "-lv", "5", "--spec-type", ",".join(kinds)]  # fmt: skip
    for kind in kinds:
        args += STRATEGIES[kind][1]
    return args


def _shared_steps(log: str) -> tuple[int, int, int]:
    """(tokens, drafted, accepted) of upstream's steps that start before the last token."""
    tokens = drafted = accepted = 0
    for match in _STEP.finditer(log):
        if tokens >= N_PREDICT - 1:
            break
        n_accepted, n_draft = int(match.group(1)), int(match.group(2))
        tokens, drafted, accepted = (
            tokens + n_accepted + 1,
            drafted + n_draft,
            accepted + n_accepted,
        )
    return tokens, drafted, accepted


@pytest.mark.parametrize("kinds", MIXES, ids=["+".join(kinds) for kinds in MIXES])
@pytest.mark.parametrize("prompt", PROMPTS)
def test_speculative_generation_equals_llama_speculative_simple(
    runtime: Any,
    gemma: Any,
    gemma_model: Path,
    upstream: UpstreamDrivers,
    prompt: str,
    kinds: list[str],
) -> None:
    text = PROMPTS[prompt]
    tokens = gemma.tokenize(text, parse_special=True)
    strategies = tuple(runtime.Strategy(kind, **STRATEGIES[kind][0]) for kind in kinds)
    spec = runtime.SpeculativeDecoding(strategies=strategies, draft_token_max=M_GRAM)
    with runtime.Context(
        gemma, n_ctx=N_CTX, n_batch=N_BATCH, n_threads=THREADS, speculative=spec
    ) as ctx:
        ours = ctx.generate(tokens, max_tokens=N_PREDICT)
    proc = upstream.run("llama-speculative-simple", _speculative_args(gemma_model, text, kinds))
    printed = _ran(proc, "llama-speculative-simple").removeprefix("\n\n")
    n_shared, drafted, accepted = _shared_steps(proc.stderr)
    assert n_shared >= N_PREDICT - 1 or ours.finish_reason.value == "eog"
    shared = _generated(gemma, ours)[:n_shared]
    assert printed.startswith(_pieces(gemma, tokens + shared)), printed
    assert (ours.metrics.drafted_tokens, ours.metrics.accepted_tokens) == (drafted, accepted)
    if prompt == "copy-edit":
        assert ours.metrics.accepted_tokens > 0, "nothing was drafted: the test tests nothing"
