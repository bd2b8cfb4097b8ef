"""Streaming: the callback and the iterator give exactly the result's text, with characters split
across tokens decoded whole and stop sequences never streamed in part."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.mtp.conftest import generate, mtp_spec

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]


def _spec(runtime: Any, mtp: bool) -> Any:
    return mtp_spec(runtime) if mtp else runtime.SpeculativeDecoding()


def _recorded(
    runtime: Any, libs: Any, model: Path, mtp: bool, max_tokens: int, stop: str
) -> tuple[Any, list[tuple[int, str]]]:
    """A generation with one stop sequence, and the calls its on_token got."""
    calls: list[tuple[int, str]] = []
    result = generate(
        runtime, libs, model, mtp=mtp, max_tokens=max_tokens, stop=[stop],
        on_token=lambda t, p: calls.append((t, p)),
    )  # fmt: skip
    return result, calls


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.parametrize("mtp", [False, True])
def test_split_characters_stream_whole(
    runtime: Any, libs: Any, byte_models: dict[str, Path], mtp: bool
) -> None:
    with runtime.Model(byte_models["agree"], load_mtp=mtp, libs=libs) as model:
        # the first token whose byte leads a multi-byte character; generation starts before it
        lead = next(t for t in range(model.n_vocab) if model.token_bytes(t)[:1] >= b"\xc2")
        calls: list[tuple[int, str]] = []
        with runtime.Context(model, n_ctx=128, speculative=_spec(runtime, mtp)) as ctx:
            result = ctx.generate(
                [lead - 1], max_tokens=24, on_token=lambda t, p: calls.append((t, p))
            )
            with ctx.stream([lead - 1], max_tokens=24) as stream:
                pieces = list(stream)
        token_bytes = [model.token_bytes(t) for t in result.tokens]
    assert result.tokens[0] == lead and len(result.tokens) == 24
    whole = b"".join(token_bytes).decode("utf-8", errors="replace")
    assert result.text == whole
    assert "".join(p for _, p in calls) == whole
    assert [t for t, _ in calls] == list(result.tokens)
    assert "".join(pieces) == whole and all(pieces)
    assert stream.result is not None and stream.result.tokens == result.tokens
    # characters really were split: tokens that are not UTF-8 alone, characters of several bytes
    assert [b for b in token_bytes if not _is_utf8(b)]
    assert [c for c in whole if len(c.encode("utf-8")) > 1 and c != "\ufffd"]
    # decoding each token alone (as before) gives replacement characters a whole decode does not
    alone = "".join(b.decode("utf-8", errors="replace") for b in token_bytes)
    assert alone.count("\ufffd") > whole.count("\ufffd")
    # the lead byte releases nothing: its character comes whole with a later token
    assert calls[0] == (lead, "")


@pytest.mark.parametrize("mtp", [False, True])
def test_stop_sequence_never_streamed_in_part(
    runtime: Any, libs: Any, models: dict[str, Path], mtp: bool
) -> None:
    full = generate(runtime, libs, models["agree"], mtp=mtp, max_tokens=20)
    with runtime.Model(models["agree"], libs=libs) as model:
        head = model.detokenize(full.tokens[:6])
        stop = model.detokenize(full.tokens[6:8])  # spans tokens 6 and 7
    stopped, calls = _recorded(runtime, libs, models["agree"], mtp, 20, stop)
    assert stopped.finish_reason is runtime.FinishReason.STOP
    assert stopped.text == head
    assert "".join(p for _, p in calls) == head  # the b3b4b5b6 vs b3b4b5
    assert [t for t, _ in calls] == list(stopped.tokens) == list(full.tokens[:8])
    with runtime.Model(models["agree"], load_mtp=mtp, libs=libs) as model:
        with runtime.Context(model, n_ctx=256, speculative=_spec(runtime, mtp)) as ctx:
            pieces = list(ctx.stream([10, 11, 12], max_tokens=20, stop=[stop]))
    assert "".join(pieces) == head


@pytest.mark.parametrize("mtp", [False, True])
def test_held_back_text_is_released_when_the_stop_sequence_fails(
    runtime: Any, libs: Any, models: dict[str, Path], mtp: bool
) -> None:
    full = generate(runtime, libs, models["agree"], mtp=mtp, max_tokens=12)
    with runtime.Model(models["agree"], libs=libs) as model:
        piece = [model.detokenize([t]) for t in full.tokens]
    stop = piece[6] + piece[7] + "\x00"  # begins like tokens 6 and 7, never completes
    result, calls = _recorded(runtime, libs, models["agree"], mtp, 12, stop)
    assert result.finish_reason is runtime.FinishReason.LENGTH
    assert result.tokens == full.tokens and result.text == full.text
    released = [p for _, p in calls]
    assert released == _held_back_pieces(piece, stop)
    assert released[6:8] == ["", ""]  # tokens 6 and 7 could begin the stop sequence
    assert released[8].endswith(piece[6] + piece[7] + piece[8])
    assert "".join(released) == full.text


def _held_back_pieces(pieces: list[str], stop: str) -> list[str]:
    """What each token should release: the text so far less its longest end that begins
    ``stop``; the last token releases the rest."""
    out: list[str] = []
    done = 0
    for i in range(len(pieces)):
        text = "".join(pieces[: i + 1])
        hold = max(n for n in range(len(stop)) if text.endswith(stop[:n]))
        end = len(text) if i == len(pieces) - 1 else len(text) - hold
        out.append(text[done:end])
        done = end
    return out


def test_text_held_at_the_end_comes_with_the_tail_token(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    """Cancelled while text is held back: one more call (TAIL_TOKEN) releases it."""
    full = generate(runtime, libs, models["agree"], mtp=False, max_tokens=12)
    with runtime.Model(models["agree"], libs=libs) as model:
        piece = [model.detokenize([t]) for t in full.tokens]
    cancel = runtime.Cancellation()
    calls: list[tuple[int, str]] = []

    def on_token(token: int, text: str) -> None:
        calls.append((token, text))
        if len(calls) == 8:
            cancel.cancel()

    stop = piece[6] + piece[7] + "\x00"
    result = generate(
        runtime, libs, models["agree"], mtp=False, max_tokens=12, stop=[stop],
        on_token=on_token, cancel=cancel,
    )  # fmt: skip
    assert result.finish_reason is runtime.FinishReason.CANCELLED
    assert result.tokens == full.tokens[:8]
    assert result.text == "".join(piece[:8])
    assert calls[-1] == (runtime.TAIL_TOKEN, piece[6] + piece[7])
    assert "".join(p for _, p in calls) == result.text


def test_stream_closed_early_frees_the_context(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    with runtime.Model(models["agree"], libs=libs) as model:
        with runtime.Context(model, n_ctx=128) as ctx:
            stream = ctx.stream([10, 11, 12], max_tokens=20)
            first = next(stream)
            with pytest.raises(runtime.LlamaRuntimeError, match="generating already"):
                ctx.generate([3, 4], max_tokens=2)
            stream.close()
            assert stream.result is None
            again = ctx.generate([10, 11, 12], max_tokens=20)
    assert again.text.startswith(first)
    assert len(again.tokens) == 20


def test_stream_checks_its_arguments_at_once(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    with runtime.Model(models["agree"], libs=libs) as model:
        with runtime.Context(model, n_ctx=128) as ctx:
            with pytest.raises(ValueError, match="max_tokens"):
                ctx.stream([1, 2], max_tokens=-1)
            with pytest.raises(TypeError, match="max_token"):
                ctx.stream([1, 2], max_token=3)


def test_two_streams_made_before_either_is_read(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    with runtime.Model(models["agree"], libs=libs) as model:
        with runtime.Context(model, n_ctx=128) as ctx:
            first = ctx.stream([10, 11, 12], max_tokens=4)
            second = ctx.stream([20, 21], max_tokens=4)
            head = next(first)
            with pytest.raises(runtime.LlamaRuntimeError, match="generating already"):
                next(second)
            text = head + "".join(first)
    assert first.result is not None and len(first.result.tokens) == 4
    assert text == first.result.text


def test_stop_takes_one_string_or_a_sequence_of_them(
    runtime: Any, libs: Any, models: dict[str, Path]
) -> None:
    """A string is one stop sequence, never its characters (llama-cpp-python takes stop= both
    ways); a list or tuple as given; anything else is a TypeError before anything is decoded."""
    plain = generate(runtime, libs, models["plain"], mtp=False, max_tokens=12)
    stop = plain.text[6:12]  # a sequence in the middle of the text, not its first character
    assert len(stop) > 1 and plain.text.find(stop[0]) < plain.text.find(stop)
    for given in (stop, [stop], (stop,)):
        result = generate(runtime, libs, models["plain"], mtp=False, max_tokens=12, stop=given)
        assert result.text == plain.text[: plain.text.find(stop)], given
        assert result.finish_reason == runtime.FinishReason.STOP
    for bad in (3, [stop, 3], b"x", {stop}):
        with pytest.raises(TypeError, match="stop="):
            generate(runtime, libs, models["plain"], mtp=False, max_tokens=12, stop=bad)
