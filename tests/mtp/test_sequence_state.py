"""Several sequences that last, on the synthetic models: ``generate_batch`` leaves each sequence
holding its prompt and reply, the next batch keeps each one's common prefix (plain decoding and
every speculative mode; the models are hybrid, so the recurrent layer's state too), and one
sequence's state (``llama_state_seq_*``, with the sidecar's) saves and loads into any sequence of
another context. Every expected output is computed in the same test, by a fresh one-sequence
context per turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.mtp.test_speculation_composes import MODES, PROMPTS, REPLY, TURNS, context_factory

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

# each sequence's second user turn
FOLLOW_UPS = (TURNS[1], TURNS[2], TURNS[3])
N_SEQ = len(PROMPTS)


def _first_batch(ctx: Any) -> tuple[list[Any], list[list[int]]]:
    """The first batch's results on ``ctx``, and each sequence's second prompt (its prompt,
    reply and follow-up turn)."""
    first = ctx.generate_batch(list(PROMPTS), max_tokens=REPLY)
    second = [
        [*prompt, *result.tokens, *follow]
        for prompt, result, follow in zip(PROMPTS, first, FOLLOW_UPS, strict=True)
    ]
    return first, second


def _alone(make: Any, prompts: list[list[int]]) -> list[list[int]]:
    return [list(make().generate(p, max_tokens=REPLY).tokens) for p in prompts]


@pytest.mark.parametrize("mode", MODES)
def test_a_second_batch_keeps_each_sequence_and_equals_fresh_contexts(
    runtime: Any, libs: Any, models: dict[str, Path], mode: str
) -> None:
    with context_factory(runtime, libs, models, mode, n_seq=N_SEQ) as make:
        ctx = make()
        first, second_prompts = _first_batch(ctx)
        second = ctx.generate_batch(second_prompts, max_tokens=REPLY)
        off = ctx.generate_batch(second_prompts, max_tokens=REPLY, reuse_prefix=False)
    with context_factory(runtime, libs, models, mode) as make:
        expected_first = _alone(make, [list(p) for p in PROMPTS])
        expected_second = _alone(make, second_prompts)
    assert [list(r.tokens) for r in first] == expected_first
    assert [list(r.tokens) for r in second] == expected_second
    assert [list(r.tokens) for r in off] == expected_second
    for result, follow in zip(second, FOLLOW_UPS, strict=True):
        metrics = result.metrics
        assert metrics.prompt_reuse == runtime.PromptReuse.KEPT
        # the user's turn, and the previous reply's last token (sampled, not yet decoded)
        assert metrics.decoded_prompt_tokens == len(follow) + 1
    assert all(r.metrics.prompt_reuse == runtime.PromptReuse.OFF for r in off)


@pytest.mark.parametrize("mode", ["none", "draft-mtp", "draft-simple"])
def test_generate_on_sequence_0_leaves_the_others_as_they_are(
    runtime: Any, libs: Any, models: dict[str, Path], mode: str
) -> None:
    with context_factory(runtime, libs, models, mode, n_seq=N_SEQ) as make:
        ctx = make()
        _, second_prompts = _first_batch(ctx)
        ctx.generate([5, 6, 7, 8], max_tokens=REPLY)  # sequence 0 only: something else
        second = ctx.generate_batch(second_prompts, max_tokens=REPLY)
    with context_factory(runtime, libs, models, mode) as make:
        expected = _alone(make, second_prompts)
    assert [list(r.tokens) for r in second] == expected
    reuse = [r.metrics.prompt_reuse for r in second]
    assert reuse[1:] == [runtime.PromptReuse.KEPT] * (N_SEQ - 1)
    assert reuse[0] != runtime.PromptReuse.KEPT  # sequence 0 held the other prompt


@pytest.mark.parametrize("mode", MODES)
def test_one_sequence_saved_loads_into_any_sequence_and_continues(
    runtime: Any, libs: Any, models: dict[str, Path], mode: str
) -> None:
    """Sequence 1 of a batch, saved, continues in sequence 0 of a one-sequence context and in
    sequence 2 of another batch as it does where it was saved; the whole-context state of the
    batch loads into a new context and continues every sequence. (llama.cpp loads a state only
    into a context whose KV cache has as many streams: one, with ``kv_unified``.)"""
    with context_factory(runtime, libs, models, mode, n_seq=N_SEQ, kv_unified=True) as make:
        ctx = make()
        _, second_prompts = _first_batch(ctx)
        one = ctx.save_state(seq=1)
        whole = ctx.save_state()
        uninterrupted = ctx.generate_batch(second_prompts, max_tokens=REPLY)
        into_2 = make()
        into_2.load_state(one, seq=2)
        moved = into_2.generate_batch([PROMPTS[0], PROMPTS[1], second_prompts[1]], max_tokens=REPLY)
        restored = make()
        restored.load_state(whole)
        again = restored.generate_batch(second_prompts, max_tokens=REPLY)
    with context_factory(runtime, libs, models, mode, kv_unified=True) as make:
        single = make()
        single.load_state(one)
        alone = single.generate(second_prompts[1], max_tokens=REPLY)
    expected = list(uninterrupted[1].tokens)
    assert list(alone.tokens) == expected
    assert list(moved[2].tokens) == expected
    assert [r.tokens for r in again] == [r.tokens for r in uninterrupted]
    kept = runtime.PromptReuse.KEPT
    for result in (alone, moved[2], *again):
        assert result.metrics.prompt_reuse == kept
    assert alone.metrics.decoded_prompt_tokens == len(FOLLOW_UPS[1]) + 1
    assert moved[0].metrics.prompt_reuse == runtime.PromptReuse.NONE  # sequence 0 was empty


def test_sequence_states_are_checked(runtime: Any, libs: Any, models: dict[str, Path]) -> None:
    with context_factory(runtime, libs, models, "draft-mtp", n_seq=2) as make:
        ctx = make()
        ctx.generate_batch([PROMPTS[0], PROMPTS[1]], max_tokens=4)
        one, whole = ctx.save_state(seq=1), ctx.save_state()
        with pytest.raises(ValueError, match="seq 2 is not a sequence"):
            ctx.save_state(seq=2)
        with pytest.raises(TypeError, match="seq must be an int"):
            ctx.save_state(seq=True)
        with pytest.raises(runtime.LlamaStateError, match="holds the whole context"):
            ctx.load_state(whole, seq=1)
        make().load_state(one, seq=0)  # the same layout: loads into either sequence
    with context_factory(runtime, libs, models, "draft-mtp") as make:
        with pytest.raises(runtime.LlamaStateError, match="2 KV streams; this one has 1"):
            make().load_state(one)  # a KV stream per sequence there, one here
    with context_factory(runtime, libs, models, "ngram-mod", n_seq=2) as make:
        with pytest.raises(runtime.LlamaStateError, match="another speculative"):
            make().load_state(one)
    with context_factory(runtime, libs, models, "draft-mtp", n_seq=2, kv_unified=True) as make:
        ctx = make()
        ctx.generate_batch([PROMPTS[0], PROMPTS[1]], max_tokens=4)
        whole = ctx.save_state()
    with context_factory(runtime, libs, models, "draft-mtp", kv_unified=True) as make:
        with pytest.raises(runtime.LlamaStateError, match="holds 2 sequences"):
            make().load_state(whole)
