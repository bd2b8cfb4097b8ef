"""Log-probabilities, embeddings and several sequences in one context, on the synthetic models
(the real model's cases are in tests/realmodel/)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.mtp.conftest import log_softmax_after, mtp_spec

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

PROMPT = [3, 4, 5]


def test_logprobs_are_the_models_distribution(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    with runtime.Model(models["partial"], libs=libs) as model:
        expected = log_softmax_after(runtime, model, PROMPT)
        with runtime.Context(model, n_ctx=128) as ctx:
            result = ctx.generate(PROMPT, max_tokens=6, logprobs=4)
    assert result.logprobs is not None and len(result.logprobs) == len(result.tokens) == 6
    first = result.logprobs[0]
    assert first.token == result.tokens[0]
    assert first.logprob == pytest.approx(expected[first.token], abs=1e-4)
    best = sorted(range(len(expected)), key=lambda t: -expected[t])[:4]
    assert [t for t, _ in first.top] == best
    for entry, token in zip(result.logprobs, result.tokens, strict=True):
        assert entry.token == token and entry.logprob <= 0.0
        assert len(entry.top) == 4 and entry.top[0][0] == token  # greedy: the most probable
        assert [lp for _, lp in entry.top] == sorted((lp for _, lp in entry.top), reverse=True)


def test_logprobs_in_stream_pieces_and_off_by_default(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    with runtime.Model(models["partial"], libs=libs) as model:
        with runtime.Context(model, n_ctx=128) as ctx:
            stream = ctx.stream(PROMPT, max_tokens=8, logprobs=0)
            pieces = list(stream)
            plain = ctx.generate(PROMPT, max_tokens=8)
    assert all(isinstance(p, runtime.TextPiece) for p in pieces)
    carried = [entry for piece in pieces for entry in piece.logprobs]
    assert stream.result is not None and tuple(carried) == stream.result.logprobs
    assert all(entry.top == () for entry in carried)
    assert "".join(pieces) == stream.result.text == plain.text
    assert plain.logprobs is None


@pytest.mark.parametrize("value", [-1, True, 1.5, "3"])
def test_bad_logprobs_are_refused(
    runtime: Any, libs: Any, models: dict[str, Path], value: object
) -> None:
    with runtime.Model(models["plain"], libs=libs) as model, runtime.Context(model) as ctx:
        with pytest.raises(ValueError, match="logprobs must be None or an int >= 0"):
            ctx.generate(PROMPT, logprobs=value)


def test_pooled_embeddings_match_the_token_vectors(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    with runtime.Model(models["partial"], libs=libs) as model:
        with runtime.Context(model, n_ctx=128, embeddings=True, pooling="none") as ctx:
            assert ctx.pooling == "none"
            rows = ctx.embed_tokens(PROMPT)
            unit_rows = ctx.embed_tokens(PROMPT, normalize=True)
        pooled = {}
        for pooling in ("mean", "last", "cls"):
            with runtime.Context(model, n_ctx=128, embeddings=True, pooling=pooling) as ctx:
                pooled[pooling] = ctx.embed(PROMPT)
                unit = ctx.embed(PROMPT, normalize=True)
                assert math.fsum(x * x for x in unit) == pytest.approx(1.0)
    assert len(rows) == len(PROMPT) and {len(r) for r in rows} == {len(pooled["mean"])}
    mean = [statistics.fmean(column) for column in zip(*rows, strict=True)]
    assert pooled["mean"] == pytest.approx(mean, abs=1e-5)
    assert pooled["last"] == pytest.approx(rows[-1], abs=1e-5)
    assert pooled["cls"] == pytest.approx(rows[0], abs=1e-5)
    for row, unit_row in zip(rows, unit_rows, strict=True):
        norm = math.sqrt(math.fsum(x * x for x in row))
        assert unit_row == pytest.approx([x / norm for x in row])


def test_embedding_misuse_is_refused(runtime: Any, libs: Any, models: dict[str, Path]) -> None:
    with runtime.Model(models["plain"], libs=libs) as model:
        with runtime.Context(model, n_ctx=128) as ctx:
            with pytest.raises(runtime.LlamaUnsupportedError, match="embeddings=True"):
                ctx.embed(PROMPT)
        with pytest.raises(ValueError, match="pooling= is for embeddings"):
            runtime.Context(model, pooling="mean")
        with pytest.raises(ValueError, match="pooling must be one of"):
            runtime.Context(model, embeddings=True, pooling="max")
        with runtime.Context(model, n_ctx=128, n_batch=4, embeddings=True, pooling="mean") as ctx:
            with pytest.raises(
                runtime.LlamaUnsupportedError, match=r"pools token vectors \(mean\)"
            ):
                ctx.embed_tokens(PROMPT)
            with pytest.raises(ValueError, match="does not fit one batch of n_ubatch 4"):
                ctx.embed(list(range(3, 9)))
            with pytest.raises(runtime.LlamaUnsupportedError, match="embeddings=True, for embed"):
                ctx.generate(PROMPT)
        with runtime.Context(model, n_ctx=128, embeddings=True, pooling="none") as ctx:
            with pytest.raises(runtime.LlamaUnsupportedError, match="pooling is none"):
                ctx.embed(PROMPT)


PROMPTS = [[3, 4, 5], [10, 11], [20, 21, 22, 23]]


@pytest.mark.parametrize(
    "options",
    [
        {"max_tokens": 7},
        {"max_tokens": 7, "temperature": 0.9, "seed": 11, "logprobs": 2},
        {"max_tokens": 7, "stop": "8"},
    ],
)
def test_sequences_together_equal_each_alone(
    runtime: Any, libs: Any, models: dict[str, Path], options: dict[str, Any]
) -> None:
    with runtime.Model(models["partial"], libs=libs) as model:
        with runtime.Context(model, n_ctx=512, n_seq_max=len(PROMPTS)) as ctx:
            together = ctx.generate_batch(PROMPTS, **options)
        with runtime.Context(model, n_ctx=512) as ctx:
            alone = [ctx.generate(prompt, **options) for prompt in PROMPTS]
    for a, b in zip(together, alone, strict=True):
        assert (a.tokens, a.text, a.finish_reason, a.seed) == (
            b.tokens,
            b.text,
            b.finish_reason,
            b.seed,
        )
        _same_logprobs(a.logprobs, b.logprobs)
        assert a.metrics.prompt_tokens == b.metrics.prompt_tokens
    assert {r.finish_reason for r in together} <= {"length", "stop"}


def _same_logprobs(a: Any, b: Any) -> None:
    """Equal up to float noise: the logits of a row in a batch of several sequences differ from
    a row decoded alone in the last digits (values near -37 differ by 2e-6 here)."""
    if a is None or b is None:
        assert a is b
        return
    assert [e.token for e in a] == [e.token for e in b]
    assert [e.logprob for e in a] == pytest.approx([e.logprob for e in b], abs=1e-4)
    assert [e.top[0][0] for e in a] == [e.top[0][0] for e in b]


def test_a_full_sequence_ends_alone(runtime: Any, libs: Any, models: dict[str, Path]) -> None:
    with runtime.Model(models["partial"], libs=libs) as model:
        with runtime.Context(model, n_ctx=64, n_seq_max=2) as ctx:
            cells = ctx.settings["n_ctx"] // 2
            long_prompt = [3 + i % 40 for i in range(cells - 4)]
            short, full = ctx.generate_batch([[3, 4], long_prompt], max_tokens=10)
    assert full.finish_reason == "context_full" and len(full.tokens) < 10
    assert short.finish_reason == "length" and len(short.tokens) == 10


def test_batch_misuse_is_refused(runtime: Any, libs: Any, models: dict[str, Path]) -> None:
    with runtime.Model(models["agree"], libs=libs, load_mtp=True) as model:
        with runtime.Context(model, n_ctx=128, n_seq_max=2) as ctx:
            with pytest.raises(ValueError, match="3 prompts need n_seq_max >= 3"):
                ctx.generate_batch(PROMPTS)
            with pytest.raises(TypeError, match="non-empty sequence of prompts"):
                ctx.generate_batch("one prompt")
            with pytest.raises(TypeError, match="does not take on_token"):
                ctx.generate_batch(PROMPTS[:2], on_token=print)
        with runtime.Context(model, n_ctx=128, speculative=mtp_spec(runtime)) as ctx:
            with pytest.raises(ValueError, match="2 prompts need n_seq_max >= 2"):
                ctx.generate_batch(PROMPTS[:2], max_tokens=3)
            assert len(ctx.generate_batch(PROMPTS[:1], max_tokens=3)[0].tokens) == 3
