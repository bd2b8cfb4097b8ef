"""A context's sequences as slots (``Context.slots``), on the synthetic models: requests from many
threads at once, each equal to the same request alone, with plain decoding and every speculative
mode; a request that joins while others run; the slot with the longest common prefix; a reader
that leaves; a full queue; bad requests raised in the caller's thread. Every expected output is
computed in the same test, by a context of one sequence."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.mtp.conftest import CHATML_JINJA
from tests.mtp.test_speculation_composes import MODES, context_factory

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

PROMPTS = [[3, 4, 5], [10, 11], [20, 21, 22, 23], [3, 4, 9], [40, 41, 42, 40, 41], [7]]
REPLY = 10


@pytest.mark.parametrize(
    ("mode", "unified"),
    [*((mode, False) for mode in MODES), ("none", True), ("ngram-mod+draft-mtp", True)],
)
def test_requests_from_threads_equal_each_alone(
    runtime: Any, libs: Any, models: dict[str, Path], mode: str, unified: bool
) -> None:
    """Six requests from six threads into three slots (so some wait), each with log-
    probabilities: every reply is that prompt's alone, and no slot accepts fewer drafts than the
    same requests alone; with a KV buffer per slot and with one for all (the server's)."""
    with context_factory(runtime, libs, models, mode) as make:
        ctx = make()
        alone = [ctx.generate(p, max_tokens=REPLY, logprobs=2, reuse_prefix=False) for p in PROMPTS]
    with context_factory(runtime, libs, models, mode, n_seq=3, kv_unified=unified) as make:
        with make().slots() as slots:
            times: list[Any] = []
            slots.on_request_end(times.append)
            with ThreadPoolExecutor(len(PROMPTS)) as pool:
                together = list(
                    pool.map(lambda p: slots.generate(p, max_tokens=REPLY, logprobs=2), PROMPTS)
                )
            stats = slots.stats()
            cells = slots.cells_in_use()
            held = [slots.held_tokens(slot) for slot in range(slots.n_slots)]
    assert [r.tokens for r in together] == [r.tokens for r in alone]
    _check_times(times, together, [s.slot for s in stats])
    assert cells == held and all(cells)  # each slot keeps its last request (text-only prompts)
    assert [r.text for r in together] == [r.text for r in alone]
    for ours, single in zip(together, alone, strict=True):
        assert ours.logprobs is not None and single.logprobs is not None
        for a, b in zip(ours.logprobs, single.logprobs, strict=True):
            assert a.logprob == pytest.approx(b.logprob, abs=1e-4)
        if mode != "none":
            assert ours.metrics.mtp and ours.metrics.accepted_tokens >= 0
    assert sum(s.requests for s in stats) == len(PROMPTS)
    assert sum(s.generated_tokens for s in stats) == sum(len(r.tokens) for r in alone)
    if mode != "none":
        assert sum(s.accepted_tokens for s in stats) == sum(
            r.metrics.accepted_tokens for r in together
        )
        # EAGLE-3 seeds each draft with a row it keeps from the last batch; a slot that reuses a
        # prefix through a checkpoint starts without it, and skips its first draft there (the
        # wrapper's rule; llama.cpp's server carries the row in its checkpoints).
        if mode != "draft-eagle3":
            assert sum(r.metrics.accepted_tokens for r in together) >= sum(
                r.metrics.accepted_tokens for r in alone
            )
        # per draft position: every draft token counted once, a later position never accepted
        # more often than an earlier one (a draft is accepted as a prefix)
        for s in stats:
            assert (sum(s.drafted_at), sum(s.accepted_at)) == (s.drafted_tokens, s.accepted_tokens)
            for counts in (s.drafted_at, s.accepted_at):
                assert counts == sorted(counts, reverse=True)


def _check_times(times: list[Any], results: list[Any], slots: list[int]) -> None:
    """One :class:`RequestTimes` per request, its parts in order: queued, first token, end."""
    assert sorted(t.generated_tokens for t in times) == sorted(len(r.tokens) for r in results)
    for t in times:
        assert t.slot in slots and 0 <= t.queued <= t.total
        assert t.first_token is not None and t.queued <= t.first_token <= t.total
        assert t.per_output_token is not None and 0 < t.per_output_token <= t.total
    # six requests on three slots: some waited for a slot
    assert max(t.queued for t in times) > min(t.queued for t in times)


@pytest.mark.parametrize("mode", ["none", "draft-mtp"])
def test_a_request_joins_while_another_runs(
    runtime: Any, libs: Any, models: dict[str, Path], mode: str
) -> None:
    """A short request submitted after a long one has started ends first (it did not wait for
    the long one), and both equal their replies alone."""
    with context_factory(runtime, libs, models, mode) as make:
        ctx = make()
        long_alone = ctx.generate(PROMPTS[0], max_tokens=200, reuse_prefix=False)
        short_alone = ctx.generate(PROMPTS[1], max_tokens=3, reuse_prefix=False)
    assert len(long_alone.tokens) > 50
    with context_factory(runtime, libs, models, mode, n_seq=2) as make:
        with make().slots() as slots:
            long_stream = slots.stream(PROMPTS[0], max_tokens=200)
            first = next(long_stream)  # the long one runs
            short = slots.generate(PROMPTS[1], max_tokens=3)
            assert slots.busy == 1  # the long one still runs when the short one has ended
            rest = "".join(long_stream)
    assert first + rest == long_alone.text
    assert long_stream.result is not None and long_stream.result.tokens == long_alone.tokens
    assert short.tokens == short_alone.tokens


def test_a_waiting_request_that_is_cancelled_leaves_the_queue_at_once(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    """One slot busy with a long stream (thousands of tokens: a second or more here), a second
    request waits behind it; cancelling the waiting one ends it now (cancelled, no token) and
    frees its place in the queue while the long one still runs: with max_waiting=1 a third
    request is then taken."""
    with context_factory(runtime, libs, models, "none", n_seq=1, n_ctx=4096) as make:
        with make().slots(max_waiting=1) as slots:
            long_stream = slots.stream(PROMPTS[0], max_tokens=4000)
            next(long_stream)
            cancel = runtime.Cancellation()
            waiting = slots.stream(PROMPTS[1], max_tokens=3, cancel=cancel)
            assert slots.waiting == 1
            with pytest.raises(runtime.LlamaQueueFullError):
                slots.stream(PROMPTS[2], max_tokens=3)
            cancel.cancel()
            assert slots.waiting == 0 and slots.busy == 1
            assert "".join(waiting) == ""
            assert waiting.result is not None
            assert waiting.result.finish_reason == "cancelled" and waiting.result.tokens == ()
            third = slots.stream(PROMPTS[2], max_tokens=3)  # its place is free
            assert slots.busy == 1  # the long one still runs
            "".join(long_stream)
            assert len("".join(third)) >= 0 and third.result is not None
            assert len(third.result.tokens) == 3


def test_the_slot_with_the_longest_common_prefix(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    """Each slot keeps what its last request left, and a follow-up goes to the slot holding its
    conversation: its prompt is reused there, and the reply equals a fresh context's."""
    first_prompts = [[*range(10, 40)], [*range(50, 80)]]
    with context_factory(runtime, libs, models, "none", n_seq=2) as make:
        with make().slots() as slots:
            firsts = [slots.generate(p, max_tokens=REPLY) for p in first_prompts]
            follow = [*first_prompts[1], *firsts[1].tokens, 5, 6]
            second = slots.generate(follow, max_tokens=REPLY)
        fresh = make().generate(follow, max_tokens=REPLY)
    assert second.tokens == fresh.tokens
    # the slot holds the prompt and the reply but its last token (sampled, never decoded)
    assert second.metrics.reused_prompt_tokens == len(first_prompts[1]) + len(firsts[1].tokens) - 1


def test_a_reader_that_leaves_frees_its_slot(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    """Closing a stream ends its generation at the next step (cancelled); the slot then serves
    the next request, whose reply equals a fresh context's."""
    with context_factory(runtime, libs, models, "draft-mtp", n_seq=1) as make:
        with make().slots() as slots:
            stream = slots.stream(PROMPTS[0], max_tokens=200)
            next(stream)
            stream.close()
            after = slots.generate(PROMPTS[2], max_tokens=REPLY)
            stats = slots.stats()
        fresh = make().generate(PROMPTS[2], max_tokens=REPLY)
    assert after.tokens == fresh.tokens
    assert stats[0].requests == 2
    assert stats[0].generated_tokens < 200 + REPLY


def test_a_full_queue_and_bad_requests(runtime: Any, libs: Any, models: dict[str, Path]) -> None:
    """With the one slot busy and no room to wait, a request is LlamaQueueFullError; a bad
    request raises in the caller's thread; the slots then still serve, and close refuses more."""
    with context_factory(runtime, libs, models, "none", n_seq=1) as make:
        ctx = make()
        with ctx.slots(max_waiting=0) as slots:
            stream = slots.stream(PROMPTS[0], max_tokens=400)
            next(stream)
            with pytest.raises(runtime.LlamaQueueFullError, match="max_waiting=0"):
                slots.generate(PROMPTS[1], max_tokens=2)
            with pytest.raises(ValueError, match="does not fit"):
                slots.generate(list(range(3, 600)), max_tokens=2)
            assert slots.n_ctx == 512
            with pytest.raises(TypeError, match="unexpected generation option"):
                slots.generate(PROMPTS[1], max_tokenz=2)
            with pytest.raises(runtime.LlamaRuntimeError, match="generating already"):
                ctx.generate(PROMPTS[1], max_tokens=2)
            stream.close()
            assert len(slots.generate(PROMPTS[1], max_tokens=2).tokens) == 2
        with pytest.raises(runtime.LlamaClosedError):
            slots.generate(PROMPTS[1], max_tokens=2)
        assert len(ctx.generate(PROMPTS[1], max_tokens=2).tokens) == 2  # the context is free


def test_chats_in_slots(runtime: Any, libs: Any, models: dict[str, Path]) -> None:
    """Chats from threads, streamed as deltas, equal the same chats on a context alone."""
    chats = [[{"role": "user", "content": text}] for text in ("hi", "a b c", "hello there")]
    with context_factory(runtime, libs, models, "ngram-mod+draft-mtp") as make:
        ctx = make()
        alone = [
            ctx.chat(m, template=CHATML_JINJA, max_tokens=REPLY, reuse_prefix=False) for m in chats
        ]
    with context_factory(runtime, libs, models, "ngram-mod+draft-mtp", n_seq=2) as make:
        with make().slots() as slots:
            results: list[Any] = [None] * len(chats)

            def read(i: int) -> None:
                stream = slots.stream_chat(chats[i], template=CHATML_JINJA, max_tokens=REPLY)
                text = "".join(d.content or "" for d in stream)
                assert stream.result is not None and text == stream.result.content
                results[i] = stream.result

            threads = [threading.Thread(target=read, args=(i,)) for i in range(len(chats))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    assert [r.tokens for r in results] == [r.tokens for r in alone]
    assert [r.content for r in results] == [r.content for r in alone]


@pytest.mark.parametrize("mode", ["none", "draft-mtp", "ngram-mod+draft-mtp"])
def test_a_slots_state_saved_cleared_and_loaded(
    runtime: Any, libs: Any, models: dict[str, Path], mode: str
) -> None:
    """A slot's state (with the sidecar's) saved, the slot emptied, the state loaded into
    another slot: the follow-up goes there, reuses what it holds, and equals a fresh context's
    reply (and the reply had the slot never been emptied)."""
    first = [*range(10, 40)]
    with context_factory(runtime, libs, models, mode, n_seq=2) as make:
        with make().slots() as slots:
            reply = slots.generate(first, max_tokens=REPLY)
            follow = [*first, *reply.tokens, 5, 6]
            held = slots.held_tokens(0)
            state = slots.save_slot(0)
            slots.clear_slot(0)
            assert slots.held_tokens(0) == 0
            slots.load_slot(1, state)
            assert slots.held_tokens(1) == held
            second = slots.generate(follow, max_tokens=REPLY)
            with pytest.raises(ValueError, match="slot must be"):
                slots.save_slot(2)
        fresh = make().generate(follow, max_tokens=REPLY)
    assert second.tokens == fresh.tokens
    assert second.metrics.reused_prompt_tokens == held


def test_a_generating_slot_keeps_its_state(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    with context_factory(runtime, libs, models, "none", n_seq=1) as make:
        with make().slots() as slots:
            stream = slots.stream(PROMPTS[0], max_tokens=400)
            next(stream)
            with pytest.raises(runtime.LlamaRuntimeError, match="slot 0 is generating"):
                slots.save_slot(0)
            stream.close()
