"""The runtime's features on a real model (Gemma 3 270M Q4_K_M, a base model with no chat template
in its GGUF): chat with a named template, log-probabilities, embeddings, several sequences,
n-gram speculation, llama.cpp's parameters, load errors and lifetimes. (Token-for-token equality
with llama.cpp's own programs: test_upstream_drivers.py.)"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from generator.native.build import BuildResult
from tests.bindings_process import run_json
from tests.mtp.conftest import BINDINGS_PARENT, log_softmax_after
from tests.mtp.test_lifetimes import CASES, EXPECTED, MODEL_SURFACE, PREAMBLE

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

THREADS = 2
STORY = "Once upon a time, in a small village by the sea, there lived"
MESSAGES = [{"role": "user", "content": "Name three colors."}]


def test_chat_with_a_named_template(runtime: Any, gemma: Any) -> None:
    assert gemma.chat_template is None  # this GGUF has none: chat needs template=
    with pytest.raises(runtime.ChatTemplateError, match="no chat template"):
        gemma.apply_chat_template(MESSAGES)
    text = gemma.apply_chat_template(MESSAGES, template="gemma")
    assert text.startswith("<start_of_turn>user\nName three colors.<end_of_turn>\n")
    assert text.endswith("<start_of_turn>model\n")
    turn = gemma.tokenize("<start_of_turn>", add_special=False, parse_special=True)
    assert len(turn) == 1  # a special token, parsed as one
    prompt = gemma.tokenize(text, parse_special=True)
    assert prompt.count(turn[0]) == 2
    with runtime.Context(gemma, n_ctx=512, n_threads=THREADS) as ctx:
        chat = ctx.chat(MESSAGES, template="gemma", max_tokens=12)
        # decoded whole again: with repacked weights, a prompt decoded in two parts (the reused
        # prefix, then the rest) may give other logits in the last bits
        plain = ctx.generate(prompt, max_tokens=12, reuse_prefix=False)
    assert chat.tokens == plain.tokens and chat.text == plain.text
    assert chat.metrics.prompt_tokens == len(prompt)


def test_logprobs_are_the_models_distribution(runtime: Any, gemma: Any) -> None:
    prompt = gemma.tokenize(STORY)
    expected = log_softmax_after(runtime, gemma, prompt)
    with runtime.Context(gemma, n_ctx=512, n_threads=THREADS) as ctx:
        result = ctx.generate(prompt, max_tokens=6, logprobs=5)
    first = result.logprobs[0]
    assert first.token == result.tokens[0] == max(range(len(expected)), key=expected.__getitem__)
    assert first.logprob == pytest.approx(expected[first.token], abs=1e-4)
    assert [lp for _, lp in first.top] == pytest.approx(
        sorted(expected, reverse=True)[:5], abs=1e-4
    )
    assert math.fsum(math.exp(lp) for lp in expected) == pytest.approx(1.0)
    assert all(entry.top[0][0] == entry.token for entry in result.logprobs)  # greedy


def test_pooled_embeddings_on_a_real_model(runtime: Any, gemma: Any) -> None:
    text = "a cat sits on the mat"
    with runtime.Context(gemma, n_ctx=512, embeddings=True, pooling="none") as ctx:
        rows = ctx.embed_tokens(text)
    with runtime.Context(gemma, n_ctx=512, embeddings=True, pooling="mean") as ctx:
        mean = ctx.embed(text)
        unit = ctx.embed(text, normalize=True)
    assert len(rows) == len(gemma.tokenize(text)) and len(mean) == len(rows[0])
    expected = [statistics.fmean(column) for column in zip(*rows, strict=True)]
    assert mean == pytest.approx(expected, rel=1e-3, abs=1e-4)
    assert math.fsum(x * x for x in unit) == pytest.approx(1.0)


def test_sequences_together(runtime: Any, gemma: Any) -> None:
    """Two prompts in one context, one batch per step: measured equal, token for token, to each
    prompt alone on this model and build (logits of a 2-row batch may differ in the last bits
    from a 1-row one; this is what it gives here)."""
    prompts = [STORY, "The capital of France is"]
    with runtime.Context(gemma, n_ctx=1024, n_seq_max=2, n_threads=THREADS) as ctx:
        together = ctx.generate_batch(prompts, max_tokens=16, stop="\n\n")
    with runtime.Context(gemma, n_ctx=1024, n_threads=THREADS) as ctx:
        # each prompt decoded whole, as in the batch (a reused BOS would split the second one)
        alone = [
            ctx.generate(prompt, max_tokens=16, stop="\n\n", reuse_prefix=False)
            for prompt in prompts
        ]
    assert [r.tokens for r in together] == [r.tokens for r in alone]
    assert [r.text for r in together] == [r.text for r in alone]


def test_ngram_speculation_drafts_and_keeps_the_output(runtime: Any, gemma: Any) -> None:
    text = "Repeat the list exactly.\nList: red, green, blue, yellow, purple, orange.\nList:"
    strategy = runtime.Strategy("ngram-simple", size_n=3, size_m=8)
    spec = runtime.SpeculativeDecoding(strategies=(strategy,), draft_token_max=8)
    with runtime.Context(gemma, n_ctx=512, n_threads=THREADS, speculative=spec) as ctx:
        result = ctx.generate(text, max_tokens=16)
    assert result.metrics.drafted_tokens > 0 and result.metrics.accepted_tokens > 0
    assert result.text.startswith(" red, green, blue")


def test_context_parameters_on_a_real_model(runtime: Any, gemma: Any) -> None:
    """Gemma 3 has sliding-window layers: swa_full and the KV types reach llama.cpp."""
    with runtime.Context(
        gemma, n_ctx=512, n_threads=THREADS, flash_attn="on", type_k="q8_0", type_v="q8_0",
        swa_full=False,
    ) as ctx:  # fmt: skip
        settings = ctx.settings
        assert len(ctx.generate(STORY, max_tokens=4).tokens) == 4
    assert (settings["flash_attn_type"], settings["type_v"], settings["swa_full"]) == (
        "on", "q8_0", False,
    )  # fmt: skip
    with pytest.raises(runtime.LlamaLoadError, match="quantized V cache requires flash_attn"):
        runtime.Context(gemma, n_ctx=512, flash_attn="off", type_v="q8_0")


def test_truncated_file_says_why(
    runtime: Any, libs: Any, gemma_model: Path, tmp_path: Path
) -> None:
    truncated = tmp_path / "truncated.gguf"
    with gemma_model.open("rb") as source:
        truncated.write_bytes(source.read(16 * 1024 * 1024))
    with pytest.raises(runtime.LlamaLoadError) as info:
        runtime.Model(truncated, libs=libs)
    assert "not within the file bounds" in info.value.reason
    assert "not within the file bounds" in str(info.value)


REAL_CASES = [name for name in CASES if "MTP" not in name]


@pytest.mark.parametrize("case", REAL_CASES)
def test_lifetime_on_a_real_model(
    case: str, host_build: BuildResult, gemma_model: Path, tmp_path: Path
) -> None:
    """tests/mtp/test_lifetimes.py's cases (but the MTP one) with Gemma as the model."""
    code = PREAMBLE + MODEL_SURFACE + CASES[case] + "\nprint(json.dumps(seen))\n"
    seen: dict[str, Any] = run_json(
        code, BINDINGS_PARENT, str(host_build.lib_dir), str(gemma_model), str(gemma_model)
    )
    EXPECTED[case](seen)


COPY = (
    "Copy the text exactly.\nText: The baker opens his shop at six, and the smell of fresh bread "
    "fills the street. Children stop on their way to school to buy a warm roll.\nCopy:"
)


@pytest.mark.parametrize("prompt", [STORY, COPY])
def test_speculation_equals_plain_greedy_without_repacked_weights(
    runtime: Any, libs: Any, gemma_model: Path, prompt: str
) -> None:
    """The guarantee docs/how-to/mtp.md states: where a row's logits do not depend on its batch
    (here: the same Q4_K_M file with llama.cpp's repacked CPU layouts off), greedy output with
    n-gram speculation (drafts verified in batches, the prompt split n-1 + 1) is plain greedy's."""
    strategies = (
        runtime.Strategy("ngram-simple", size_n=3, size_m=8),
        runtime.Strategy("ngram-mod", n_match=4, mod_n_min=2, mod_n_max=8),
    )
    spec = runtime.SpeculativeDecoding(strategies=strategies[:1], draft_token_max=8)
    mixed = runtime.SpeculativeDecoding(strategies=strategies, draft_token_max=8)
    with runtime.Model(gemma_model, libs=libs, use_extra_bufts=False) as model:
        with runtime.Context(model, n_ctx=512, n_threads=THREADS) as ctx:
            plain = ctx.generate(prompt, max_tokens=48)
        for speculative in (spec, mixed):
            with runtime.Context(
                model, n_ctx=512, n_threads=THREADS, speculative=speculative
            ) as ctx:
                drafted = ctx.generate(prompt, max_tokens=48)
            assert drafted.tokens == plain.tokens
            if prompt is COPY:
                assert drafted.metrics.accepted_tokens > 0
