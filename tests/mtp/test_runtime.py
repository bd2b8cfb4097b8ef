"""The generated runtime on the tiny test models: MTP output, metrics, stop, cancel, defaults."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tests.mtp.conftest import generate, mtp_spec

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]


@pytest.mark.parametrize("kind", ["agree", "partial"])
def test_greedy_output_identical_with_and_without_mtp(
    runtime: Any, libs: Any, models: dict[str, Path], kind: str
) -> None:
    plain = generate(runtime, libs, models[kind], mtp=False, max_tokens=40)
    streamed: list[int] = []
    mtp = generate(
        runtime, libs, models[kind], mtp=True, max_tokens=40,
        on_token=lambda token, _piece: streamed.append(token),
    )  # fmt: skip
    assert len(plain.tokens) == 40
    assert mtp.tokens == plain.tokens
    assert tuple(streamed) == mtp.tokens
    assert mtp.text == plain.text
    m = mtp.metrics
    assert m.mtp and not plain.metrics.mtp
    assert m.drafted_tokens > 0 and m.accepted_tokens > 0
    assert m.accepted_tokens <= m.drafted_tokens
    # each step yields its accepted drafts plus one token of the target
    assert m.generated_tokens <= m.accepted_tokens + m.steps
    assert m.steps < plain.metrics.steps
    if kind == "partial":
        assert 0.0 < m.acceptance_rate < 1.0
    else:
        assert m.acceptance_rate > 0.5


def test_defaults_unchanged(runtime: Any, libs: Any, models: dict[str, Path]) -> None:
    """Without speculative options a context decodes like a hand-written llama_decode + argmax
    loop over the raw bindings, and drafts nothing."""
    spec = runtime.SpeculativeDecoding()
    assert spec.mode is runtime.SpeculativeMode.NONE and not spec.enabled
    assert (spec.draft_token_max, spec.draft_token_min, spec.p_min) == (3, 0, 0.0)
    prompt = [7, 8, 9]
    with runtime.Model(models["partial"], libs=libs) as model:
        assert model.load_mtp is False
        with runtime.Context(model, n_ctx=128) as ctx:
            assert not ctx.mtp_enabled
            result = ctx.generate(prompt, max_tokens=12)
            # the same context, by hand
            llama, ffi = libs.llama, libs.ffi
            llama.llama_memory_clear(llama.llama_get_memory(ctx.handle), True)
            n_vocab = model.n_vocab
            buf = ffi.new("llama_token[]", prompt)
            expected: list[int] = []
            assert llama.llama_decode(ctx.handle, llama.llama_batch_get_one(buf, len(prompt))) == 0
            for _ in range(12):
                logits = llama.llama_get_logits_ith(ctx.handle, -1)
                token = max(range(n_vocab), key=lambda i: logits[i])
                expected.append(token)
                one = ffi.new("llama_token[1]", [token])
                assert llama.llama_decode(ctx.handle, llama.llama_batch_get_one(one, 1)) == 0
    assert list(result.tokens) == expected
    assert result.metrics.drafted_tokens == 0 and result.metrics.accepted_tokens == 0
    assert result.metrics.steps == 12
    assert result.finish_reason is runtime.FinishReason.LENGTH


@pytest.mark.parametrize("mtp", [False, True])
def test_metrics_logged_without_paths(
    runtime: Any, libs: Any, models: dict[str, Path], mtp: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="llama_bindings.runtime"):
        result = generate(runtime, libs, models["agree"], mtp=mtp, max_tokens=8)
    records = [r for r in caplog.records if r.name == "llama_bindings.runtime"]
    assert len(records) == 1
    message = records[0].getMessage()
    assert runtime.LLAMA_CPP_TAG in message
    assert ("mtp on" if mtp else "mtp off") in message
    assert f"{result.metrics.drafted_tokens} drafted" in message
    assert f"{result.metrics.accepted_tokens} accepted" in message
    path = models["agree"]
    for forbidden in (str(path), path.name, str(path.parent)):
        assert forbidden not in message


@pytest.mark.parametrize("mtp", [False, True])
def test_stop_sequence(runtime: Any, libs: Any, models: dict[str, Path], mtp: bool) -> None:
    full = generate(runtime, libs, models["agree"], mtp=mtp, max_tokens=20)
    pieces = [full.text]  # the stop string spans tokens 6 and 7 of the full output
    with runtime.Model(models["agree"], libs=libs) as model:
        stop = model.detokenize(full.tokens[6:8])
        head = model.detokenize(full.tokens[:6])
    assert stop and pieces[0].find(stop) == len(head)
    stopped = generate(runtime, libs, models["agree"], mtp=mtp, max_tokens=20, stop=[stop])
    assert stopped.finish_reason is runtime.FinishReason.STOP
    assert stopped.text == head
    assert stopped.tokens == full.tokens[:8]


@pytest.mark.parametrize("mtp", [False, True])
def test_cancellation(runtime: Any, libs: Any, models: dict[str, Path], mtp: bool) -> None:
    cancel = runtime.Cancellation()
    seen: list[int] = []

    def on_token(token: int, _piece: str) -> None:
        seen.append(token)
        if len(seen) == 5:
            cancel.cancel()

    result = generate(
        runtime, libs, models["agree"], mtp=mtp, max_tokens=30, on_token=on_token, cancel=cancel
    )
    assert result.finish_reason is runtime.FinishReason.CANCELLED
    assert len(result.tokens) == 5 and tuple(seen) == result.tokens


def test_cancelled_before_the_prompt(runtime: Any, libs: Any, models: dict[str, Path]) -> None:
    cancel = runtime.Cancellation()
    cancel.cancel()
    result = generate(runtime, libs, models["agree"], mtp=True, max_tokens=30, cancel=cancel)
    assert result.finish_reason is runtime.FinishReason.CANCELLED
    assert result.tokens == ()


def test_context_reused_across_generations(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    """A second generation on the same MTP context starts clean and matches a fresh one."""
    with runtime.Model(models["partial"], load_mtp=True, libs=libs) as model:
        with runtime.Context(model, n_ctx=256, speculative=mtp_spec(runtime)) as ctx:
            first = ctx.generate([20, 21], max_tokens=16)
            second = ctx.generate([40, 41, 42], max_tokens=16)
    fresh = generate(runtime, libs, models["partial"], mtp=False, prompt=[40, 41, 42],
                     max_tokens=16)  # fmt: skip
    assert len(first.tokens) == 16
    assert second.tokens == fresh.tokens
    assert second.metrics.drafted_tokens > 0


def test_backend_sampling_is_counted_and_can_be_turned_off(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    """The CPU backend takes the draft sampler (llama.cpp's backend sampling): every draft is
    counted as sampled there; turned off, none is, and the output does not change."""
    runs = {}
    for on in (True, False):
        spec = runtime.SpeculativeDecoding(runtime.SpeculativeMode.DRAFT_MTP, backend_sampling=on)
        with runtime.Model(models["partial"], load_mtp=True, libs=libs) as model:
            with runtime.Context(model, n_ctx=256, speculative=spec) as ctx:
                runs[on] = ctx.generate([10, 11, 12], max_tokens=24)
    on, off = runs[True].metrics, runs[False].metrics
    assert on.drafts > 0 and on.backend_sampled_drafts == on.drafts
    assert off.drafts > 0 and off.backend_sampled_drafts == 0
    assert runs[True].tokens == runs[False].tokens
    assert on.as_dict()["backend_sampled_drafts"] == on.backend_sampled_drafts
