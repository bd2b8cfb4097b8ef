"""Speculation that composes, on the synthetic models: prompt-prefix reuse (on by default) with
plain decoding and every speculative mode, log-probabilities under speculation, and a grammar
with every mode.

The synthetic models are hybrid (qwen35: a recurrent layer whose state llama.cpp cannot cut at an
arbitrary position), so these tests also cover the checkpoints: an append-only conversation keeps
its whole prefix in place, a prompt that leaves the last reply restores the checkpoint taken
where the last prompt ended, one that leaves the first prompt is decoded in full. Every expected
output is computed in the same test, by a fresh context per turn.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

# Four user turns of an append-only conversation (token ids), the first one long like a system
# prompt; each repeats a run so that the n-gram strategies draft.
TURNS = (
    [*range(10, 30), *range(10, 30), *range(10, 22)],
    [40, 41, 42, 43, 40, 41],
    [*range(60, 66), *range(60, 64)],
    [90, 91, 92],
)
REPLY = 12
MODES = (
    "none",
    "draft-mtp",
    "ngram-simple",
    "ngram-map-k",
    "ngram-map-k4v",
    "ngram-mod",
    "ngram-cache",
    "draft-simple",
    "draft-eagle3",
    "draft-dflash",
    "draft-dspark",
    "ngram-mod+draft-mtp",
    "ngram-mod+draft-dspark",
)
# The test model each draft-model strategy drafts with: each disagrees with the target sometimes.
DRAFTS = {
    "draft-simple": "draft",
    "draft-eagle3": "eagle3-partial",
    "draft-dflash": "dflash-partial",
    "draft-dspark": "dspark-partial",
}
# n-gram map strategies given keys short enough for these short turns
SHORT_NGRAMS = ("ngram-simple", "ngram-map-k", "ngram-map-k4v")

ContextFactory = Callable[[], Any]


@contextmanager
def context_factory(
    runtime: Any,
    libs: Any,
    models: dict[str, Path],
    mode: str,
    n_seq: int = 1,
    n_ctx: int = 512,
    **options: Any,
) -> Iterator[ContextFactory]:
    """A function making contexts of ``mode`` on the partial model (drafts accepted only
    sometimes; ``models``: ``partial`` and the drafts of ``DRAFTS``), all on one loaded model
    (``n_ctx`` cells per sequence; ``options``: more of the contexts' arguments)."""
    context_options = options
    with ExitStack() as stack:
        mtp = "draft-mtp" in mode
        model = stack.enter_context(runtime.Model(models["partial"], load_mtp=mtp, libs=libs))
        options = {"draft_token_max": 4}
        if mode == "none":
            spec = runtime.SpeculativeDecoding()
        else:
            drafting = [DRAFTS[kind] for kind in mode.split("+") if kind in DRAFTS]
            if drafting:
                options["draft_model"] = stack.enter_context(
                    runtime.Model(models[drafting[0]], libs=libs)
                )
            strategies = tuple(
                runtime.Strategy(kind, size_n=3, size_m=6) if kind in SHORT_NGRAMS else kind
                for kind in mode.split("+")
            )
            spec = runtime.SpeculativeDecoding(strategies=strategies, **options)

        def make() -> Any:
            return stack.enter_context(
                runtime.Context(
                    model, n_ctx=n_ctx * n_seq, n_seq_max=n_seq, speculative=spec, **context_options
                )
            )

        yield make


def _chat(make: ContextFactory, *, fresh: bool) -> list[Any]:
    """The conversation: each turn's prompt is everything before plus the user's turn."""
    ctx = make()
    prompt: list[int] = []
    results = []
    for user in TURNS:
        prompt = prompt + user
        turn_ctx = make() if fresh else ctx
        result = turn_ctx.generate(prompt, max_tokens=REPLY)
        results.append(result)
        prompt = prompt + list(result.tokens)
    return results


@pytest.mark.parametrize("mode", MODES)
def test_a_chat_reuses_its_prefix_and_equals_fresh_contexts(
    runtime: Any, libs: Any, models: dict[str, Path], mode: str
) -> None:
    with context_factory(runtime, libs, models, mode) as make:
        fresh = _chat(make, fresh=True)
        reused = _chat(make, fresh=False)
    assert [r.tokens for r in reused] == [r.tokens for r in fresh]
    assert all(len(r.tokens) == REPLY for r in reused)
    first, *later = reused
    assert first.metrics.prompt_reuse == runtime.PromptReuse.NONE
    assert first.metrics.decoded_prompt_tokens == len(TURNS[0])
    for turn, result in zip(TURNS[1:], later, strict=True):
        metrics = result.metrics
        assert metrics.prompt_reuse == runtime.PromptReuse.KEPT
        # the user's turn, and the previous reply's last token (sampled, not yet decoded)
        assert metrics.decoded_prompt_tokens == len(turn) + 1
        assert metrics.reused_prompt_tokens == metrics.prompt_tokens - len(turn) - 1
    if mode != "none":
        assert sum(r.metrics.drafted_tokens for r in reused) > 0


@pytest.mark.parametrize(
    "mode", ["none", "draft-mtp", "ngram-map-k", "draft-simple", "draft-eagle3", "draft-dflash"]
)
def test_a_prompt_that_leaves_the_last_reply_restores_a_checkpoint(
    runtime: Any, libs: Any, models: dict[str, Path], mode: str
) -> None:
    """The recurrent layer cannot be cut inside the reply: the checkpoint taken where the last
    prompt ended is restored and the rest decoded. One that leaves the first prompt has no
    checkpoint inside the common part: decoded in full, and the metrics say so."""
    with context_factory(runtime, libs, models, mode) as make:
        first = TURNS[0]
        ctx = make()
        reply = list(ctx.generate(first, max_tokens=REPLY).tokens)
        edited = first + reply[:5] + [7, 8, 9]
        again = ctx.generate(edited, max_tokens=REPLY)
        other = [*first[:10], 5, 6]
        third = ctx.generate(other, max_tokens=REPLY)
        off = ctx.generate(other, max_tokens=REPLY, reuse_prefix=False)
        expected = [make().generate(p, max_tokens=REPLY).tokens for p in (edited, other, other)]
    assert [again.tokens, third.tokens, off.tokens] == expected
    reuse = runtime.PromptReuse
    assert again.metrics.prompt_reuse == reuse.CHECKPOINT
    # the checkpoint holds every prompt token the first generation decoded before its replies
    decoded_before_reply = len(first) - (0 if mode == "none" else 1)
    assert again.metrics.reused_prompt_tokens == decoded_before_reply
    assert (third.metrics.prompt_reuse, third.metrics.reused_prompt_tokens) == (reuse.FULL, 0)
    assert (off.metrics.prompt_reuse, off.metrics.reused_prompt_tokens) == (reuse.OFF, 0)


@pytest.mark.parametrize(
    "mode",
    [
        "draft-mtp",
        "ngram-simple",
        "draft-simple",
        "draft-eagle3",
        "draft-dflash",
        "draft-dspark",
        "ngram-mod+draft-mtp",
    ],
)
def test_logprobs_under_speculation_equal_plain_decodings(
    runtime: Any, libs: Any, models: dict[str, Path], mode: str
) -> None:
    """Taken from the rows the target verified the draft with: the same distribution as one
    token per decode (the f32 test models' logits do not depend on the batch)."""
    prompt = TURNS[0]
    with context_factory(runtime, libs, models, "none") as make:
        plain = make().generate(prompt, max_tokens=REPLY, logprobs=3)
    with context_factory(runtime, libs, models, mode) as make:
        ctx = make()
        spec = ctx.generate(prompt, max_tokens=REPLY, logprobs=3)
        pieces = list(ctx.stream(prompt, max_tokens=REPLY, logprobs=3))
    assert spec.metrics.accepted_tokens > 0  # some tokens came from accepted drafts
    assert spec.tokens == plain.tokens
    assert plain.logprobs is not None and spec.logprobs is not None
    for ours, theirs in zip(spec.logprobs, plain.logprobs, strict=True):
        assert ours.token == theirs.token
        assert ours.logprob == pytest.approx(theirs.logprob, abs=1e-4)
        assert [t for t, _ in ours.top] == [t for t, _ in theirs.top]
        for (_, a), (_, b) in zip(ours.top, theirs.top, strict=True):
            assert a == pytest.approx(b, abs=1e-4)
    streamed = tuple(entry for piece in pieces for entry in piece.logprobs)
    assert [e.token for e in streamed] == [e.token for e in spec.logprobs]


# Tokens 16, 17, 18 (hex texts "10", "11", "12") and 22..24 ("16".."18"): the prompt's run
# continues past them, so the grammar rejects many drafts.
GRAMMAR = 'root ::= ("10" | "11" | "12" | "16" | "17" | "18")+'


@pytest.mark.parametrize("mode", MODES)
def test_grammar_output_equals_plain_decodings_with_every_mode(
    runtime: Any, libs: Any, models: dict[str, Path], mode: str
) -> None:
    """A draft the grammar rejects costs only its verification: the output is plain decoding's
    with the same grammar."""
    prompt = TURNS[0]
    with context_factory(runtime, libs, models, "none") as make:
        plain = make().generate(prompt, max_tokens=REPLY, grammar=GRAMMAR)
        free = make().generate(prompt, max_tokens=REPLY)
    with context_factory(runtime, libs, models, mode) as make:
        ours = make().generate(prompt, max_tokens=REPLY, grammar=GRAMMAR)
    assert ours.tokens == plain.tokens and ours.text == plain.text
    assert len(ours.tokens) == REPLY and plain.tokens != free.tokens  # the grammar mattered
    assert set(ours.text) <= set("012678")


# Three prompts of different lengths, each with runs the n-gram strategies can draft from.
PROMPTS = (TURNS[0], [*range(50, 60), *range(50, 58)], [*range(70, 75)] * 3)


@pytest.mark.parametrize("mode", MODES[1:])
def test_sequences_together_with_speculation_equal_each_alone(
    runtime: Any, libs: Any, models: dict[str, Path], mode: str
) -> None:
    """One sidecar serves three sequences: each output is that prompt's alone (and plain
    decoding's), each result counts its own sequence's drafts, and no sequence accepts less
    than it does alone (llama.cpp's server lost draft-mtp acceptance with parallel slots,
    upstream issue 27572)."""
    with context_factory(runtime, libs, models, "none") as make:
        plain = [make().generate(p, max_tokens=REPLY, logprobs=2) for p in PROMPTS]
    with context_factory(runtime, libs, models, mode) as make:
        alone = [make().generate(p, max_tokens=REPLY, logprobs=2) for p in PROMPTS]
    with context_factory(runtime, libs, models, mode, n_seq=len(PROMPTS)) as make:
        together = make().generate_batch(list(PROMPTS), max_tokens=REPLY, logprobs=2)
    assert [r.tokens for r in together] == [r.tokens for r in alone] == [r.tokens for r in plain]
    for ours, single, flat in zip(together, alone, plain, strict=True):
        metrics = ours.metrics
        assert metrics.mtp and metrics.steps > 0
        assert metrics.accepted_tokens >= single.metrics.accepted_tokens
        assert metrics.acceptance_rate >= single.metrics.acceptance_rate
        assert sum(s.drafted_tokens for s in metrics.strategies) == metrics.drafted_tokens
        assert ours.logprobs is not None and flat.logprobs is not None
        for a, b in zip(ours.logprobs, flat.logprobs, strict=True):
            assert a.logprob == pytest.approx(b.logprob, abs=1e-4)
    assert sum(r.metrics.drafted_tokens for r in together) > 0
