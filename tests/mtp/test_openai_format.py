"""llama_bindings.openai_format: llama-cpp-python's completion and chat dicts over the runtime.

On the ``bytes`` test model greedy generation counts up through the byte tokens: after ``a``
comes ``bcdef...``, after ``~`` the bytes of multi-byte characters one per token, and after
token 255 four more tokens and then ``</s>`` (end of generation).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.mtp.test_chat_runtime import TOOLS as BOTH_TOOLS

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Count."},
]
COMPLETION_KEYS = {"id", "object", "created", "model", "choices", "usage"}
CHUNK_KEYS = COMPLETION_KEYS - {"usage"}
CHOICE_KEYS = {"text", "index", "logprobs", "finish_reason"}
CHAT_CHOICE_KEYS = {"index", "message", "logprobs", "finish_reason"}
CHUNK_CHOICE_KEYS = {"index", "delta", "logprobs", "finish_reason"}
USAGE_KEYS = {"prompt_tokens", "completion_tokens", "total_tokens"}
LOGPROB_KEYS = {"tokens", "text_offset", "token_logprobs", "top_logprobs"}


@pytest.fixture(scope="module")
def oai(runtime: Any) -> Any:
    return importlib.import_module("llama_bindings.openai_format")


@pytest.fixture
def ctx(runtime: Any, libs: Any, byte_models: dict[str, Path]) -> Iterator[Any]:
    with runtime.Model(byte_models["agree"], libs=libs) as model:
        with runtime.Context(model, n_ctx=128) as context:
            yield context


def _check_usage(usage: Any, result: Any) -> None:
    assert set(usage) == USAGE_KEYS and all(type(v) is int for v in usage.values())
    assert usage["prompt_tokens"] == result.metrics.prompt_tokens
    assert usage["completion_tokens"] == result.metrics.generated_tokens
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def _check_head(out: Any, keys: set[str], obj: str, prefix: str, model: str) -> None:
    assert set(out) == keys
    assert out["object"] == obj and out["model"] == model
    assert isinstance(out["id"], str) and out["id"].startswith(prefix) and len(out["id"]) > 20
    assert type(out["created"]) is int and abs(out["created"] - time.time()) < 120
    assert isinstance(out["choices"], list) and len(out["choices"]) == 1


def test_completion_shape_and_usage(oai: Any, ctx: Any) -> None:
    before = time.time()
    out = oai.create_completion(ctx, "a", max_tokens=6, temperature=0)
    result = ctx.generate("a", max_tokens=6)
    _check_head(out, COMPLETION_KEYS, "text_completion", "cmpl-", oai.model_name(ctx.model))
    assert out["model"] == ctx.model.metadata_value("general.name") != ""
    assert out["created"] >= int(before)
    (choice,) = out["choices"]
    assert set(choice) == CHOICE_KEYS
    assert choice == {"text": "bcdefg", "index": 0, "logprobs": None, "finish_reason": "length"}
    assert choice["text"] == result.text
    _check_usage(out["usage"], result)
    again = oai.create_completion(ctx, [10, 11], max_tokens=3, temperature=0, model="m.gguf")
    assert again["id"] != out["id"] and again["model"] == "m.gguf"
    assert again["usage"]["prompt_tokens"] == 2 and again["usage"]["completion_tokens"] == 3


def test_finish_reasons(oai: Any, runtime: Any, ctx: Any) -> None:
    def reason(prompt: Any, **options: Any) -> tuple[str, str, Any]:
        out = oai.create_completion(ctx, prompt, temperature=0, **options)
        return out["choices"][0]["finish_reason"], out["choices"][0]["text"], out["usage"]

    assert reason([255], max_tokens=16)[0] == "stop"  # end of generation after 5 tokens
    assert reason("a", max_tokens=16, stop=["de"])[:2] == ("stop", "bc")
    assert reason("a", max_tokens=16, stop="e")[:2] == ("stop", "bcd")
    assert reason("a", max_tokens=4)[:2] == ("length", "bcde")
    with runtime.Context(ctx.model, n_ctx=16) as small:  # (llama.cpp makes it 256)
        # 258 tokens from token 3 to </s>: the context fills first
        out = oai.create_completion(small, [3] * 8, max_tokens=None, temperature=0)
        result = small.generate([3] * 8, max_tokens=small.n_ctx)
    assert result.finish_reason == runtime.FinishReason.CONTEXT_FULL
    assert out["choices"][0]["finish_reason"] == "length"
    _check_usage(out["usage"], result)
    mapping = {r.value: oai.finish_reason(r) for r in runtime.FinishReason}
    assert mapping == {
        "eog": "stop",
        "stop": "stop",
        "cancelled": "stop",
        "length": "length",
        "context_full": "length",
    }


def test_cancelled_stream_finishes_with_stop(oai: Any, runtime: Any, ctx: Any) -> None:
    cancel = runtime.Cancellation()
    chunks = []
    for chunk in oai.create_completion(
        ctx, "a", max_tokens=20, stream=True, temperature=0, cancel=cancel
    ):
        chunks.append(chunk)
        if len(chunks) == 2:
            cancel.cancel()
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert "".join(c["choices"][0]["text"] for c in chunks) == "bc"


def test_closing_a_stream_ends_the_generation(oai: Any, ctx: Any) -> None:
    chunks = oai.create_completion(ctx, "a", max_tokens=20, stream=True, temperature=0)
    assert next(chunks)["choices"][0]["text"] == "b"
    chunks.close()
    chat = oai.create_chat_completion(ctx, MESSAGES, max_tokens=20, stream=True)
    assert next(chat)["choices"][0]["delta"] == {"role": "assistant"}
    chat.close()
    assert ctx.generate("a", max_tokens=2).text == "bc"  # the context is free again


@pytest.mark.parametrize("stop", [None, ["ef"]])
def test_completion_stream_joins_to_the_completion(oai: Any, ctx: Any, stop: Any) -> None:
    whole = oai.create_completion(ctx, "a", max_tokens=8, stop=stop, temperature=0)
    chunks = list(
        oai.create_completion(ctx, "a", max_tokens=8, stop=stop, temperature=0, stream=True)
    )
    assert len(chunks) >= 2 and len({c["id"] for c in chunks}) == 1
    for chunk in chunks:
        _check_head(chunk, CHUNK_KEYS, "text_completion", "cmpl-", whole["model"])
        assert set(chunk["choices"][0]) == CHOICE_KEYS and chunk["choices"][0]["index"] == 0
        assert chunk["choices"][0]["logprobs"] is None
    assert all(
        c["choices"][0]["finish_reason"] is None and c["choices"][0]["text"] for c in chunks[:-1]
    )
    last = chunks[-1]["choices"][0]
    assert last["text"] == "" and last["finish_reason"] == whole["choices"][0]["finish_reason"]
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]


def test_stream_include_usage(oai: Any, ctx: Any) -> None:
    chunks = list(
        oai.create_completion(
            ctx,
            "a",
            max_tokens=5,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["choices"] == [] and set(chunks[-1]) == COMPLETION_KEYS
    _check_usage(chunks[-1]["usage"], ctx.generate("a", max_tokens=5))
    chat = list(
        oai.create_chat_completion(
            ctx,
            MESSAGES,
            max_tokens=3,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chat[-1]["choices"] == [] and chat[-1]["usage"]["completion_tokens"] == 3


def test_echo(oai: Any, ctx: Any) -> None:
    out = oai.create_completion(ctx, "xy", max_tokens=3, temperature=0, echo=True)
    assert out["choices"][0]["text"] == "xyz{|"
    chunks = oai.create_completion(ctx, "xy", max_tokens=3, temperature=0, echo=True, stream=True)
    texts = [c["choices"][0]["text"] for c in chunks]
    assert texts[0] == "xy" and "".join(texts) == "xyz{|"


def test_chat_completion(oai: Any, ctx: Any) -> None:
    out = oai.create_chat_completion(ctx, MESSAGES, max_tokens=6, temperature=0)
    result = ctx.chat(MESSAGES, max_tokens=6)
    _check_head(out, COMPLETION_KEYS, "chat.completion", "chatcmpl-", oai.model_name(ctx.model))
    (choice,) = out["choices"]
    assert set(choice) == CHAT_CHOICE_KEYS and choice["index"] == 0
    assert choice["message"] == {"role": "assistant", "content": result.text}
    assert choice["logprobs"] is None and choice["finish_reason"] == "length"
    _check_usage(out["usage"], result)
    given = oai.create_chat_completion(
        ctx, MESSAGES, max_tokens=6, temperature=0, template="chatml"
    )
    assert given["choices"][0]["message"]["content"] == result.text


def test_chat_stream(oai: Any, ctx: Any) -> None:
    whole = oai.create_chat_completion(ctx, MESSAGES, max_tokens=6, temperature=0)
    chunks = list(
        oai.create_chat_completion(ctx, MESSAGES, max_tokens=6, temperature=0, stream=True)
    )
    for chunk in chunks:
        _check_head(chunk, CHUNK_KEYS, "chat.completion.chunk", "chatcmpl-", whole["model"])
        assert set(chunk["choices"][0]) == CHUNK_CHOICE_KEYS
        assert chunk["choices"][0]["logprobs"] is None
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas[0] == {"role": "assistant"} and deltas[-1] == {}
    assert all(set(d) == {"content"} and d["content"] for d in deltas[1:-1])
    reasons = [c["choices"][0]["finish_reason"] for c in chunks]
    assert reasons == [None] * (len(chunks) - 1) + ["length"]
    content = "".join(d.get("content", "") for d in deltas)
    assert content == whole["choices"][0]["message"]["content"]


def test_chat_messages(oai: Any, runtime: Any, ctx: Any) -> None:
    parts = [
        {"role": "system", "content": None},
        {
            "role": "user",
            "content": [{"type": "text", "text": "Co"}, {"type": "text", "text": "unt."}],
        },
    ]
    plain = [{"role": "system", "content": ""}, {"role": "user", "content": "Count."}]
    expected = ctx.chat(plain, max_tokens=4).text
    out = oai.create_chat_completion(ctx, parts, max_tokens=4, temperature=0)
    assert out["choices"][0]["message"]["content"] == expected
    objects = [runtime.ChatMessage(m["role"], m["content"]) for m in plain]
    out = oai.create_chat_completion(ctx, objects, max_tokens=4, temperature=0)
    assert out["choices"][0]["message"]["content"] == expected
    image = [{"role": "user", "content": [{"type": "image_url", "image_url": "x.png"}]}]
    with pytest.raises(runtime.LlamaUnsupportedError, match="no multimodal projector"):
        oai.create_chat_completion(ctx, image)
    with pytest.raises(ValueError, match="'role'"):
        oai.create_chat_completion(ctx, [{"content": "Hi"}])


TOOLS = BOTH_TOOLS[:1]  # get_weather


def test_chat_tool_calls_and_response_format(
    oai: Any, runtime: Any, libs: Any, byte_models: dict[str, Path], tree_pin: Path
) -> None:
    """OpenAI's tool and response-format fields, through llama.cpp's chat layer (functionary
    v3.2's template, whose required-call grammar starts at the first token, and Qwen 3.5's):
    the message, the stream's deltas and a second turn with the tool's reply."""
    templates = tree_pin / "models" / "templates"
    functionary = (templates / "meetkai-functionary-medium-v3.2.jinja").read_text()
    qwen35 = (templates / "Qwen3.5-4B.jinja").read_text()
    ask = [{"role": "user", "content": "Weather?"}]
    options: dict[str, Any] = {
        "template": functionary, "tools": TOOLS, "tool_choice": "required", "temperature": 0,
        "max_tokens": 60,
    }  # fmt: skip
    with runtime.Model(byte_models["agree"], libs=libs) as model:
        with runtime.Context(model, n_ctx=2048) as ctx:
            out = oai.create_chat_completion(ctx, ask, **options)
            result = ctx.chat(ask, **{k: v for k, v in options.items() if k != "temperature"})
            chunks = list(oai.create_chat_completion(ctx, ask, stream=True, **options))
            message = out["choices"][0]["message"]
            turn = [*ask, message, {"role": "tool", "tool_call_id": "0", "content": "sunny"}]
            second = oai.create_chat_completion(
                ctx, turn, template=qwen35, tools=TOOLS, temperature=0, max_tokens=8
            )
            fmt = {
                "type": "json_schema",
                "json_schema": {"name": "w", "schema": TOOLS[0]["function"]["parameters"]},
            }
            answer = oai.create_chat_completion(
                ctx, ask, template=qwen35, response_format=fmt, reasoning=False, temperature=0,
                max_tokens=60,
            )  # fmt: skip
    (choice,) = out["choices"]
    assert choice["finish_reason"] == "tool_calls" and message["content"] is None
    (call,) = message["tool_calls"]
    assert call["type"] == "function" and set(call) == {"id", "type", "function"}
    # functionary writes no ids: each call gets one, as llama.cpp's server gives
    assert result.tool_calls[0].id == "" and call["id"].startswith("call_") and len(call["id"]) > 8
    assert call["function"] == {"name": "get_weather", "arguments": result.tool_calls[0].arguments}
    assert json.loads(call["function"]["arguments"])["unit"] in {"c", "f"}
    deltas = [c["choices"][0]["delta"] for c in chunks]
    calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert calls[0]["index"] == 0 and calls[0]["function"]["name"] == "get_weather"
    assert calls[0]["id"].startswith("call_") and all("id" not in c for c in calls[1:])
    assert calls[0]["type"] == "function" and all("name" not in c["function"] for c in calls[1:])
    assert "".join(c["function"]["arguments"] for c in calls) == call["function"]["arguments"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    # the second turn renders the call and the tool's reply (Qwen 3.5's template): the model,
    # thinking, writes reasoning
    assert second["choices"][0]["message"]["reasoning_content"]
    content = answer["choices"][0]["message"]["content"]
    assert json.loads(content)["unit"] in {"c", "f"}


def _llama_cpp_python_style(llm: Any) -> dict[str, Any]:
    """Code written for llama-cpp-python's ``Llama`` (here ``llm``), unchanged."""
    output = llm.create_completion(prompt="a", max_tokens=5, stop=["e"], temperature=0)
    text = output["choices"][0]["text"]
    streamed = ""
    for chunk in llm.create_completion("a", max_tokens=5, stop=["e"], temperature=0, stream=True):
        streamed += chunk["choices"][0]["text"]
    response = llm.create_chat_completion(messages=MESSAGES, max_tokens=4, temperature=0)
    reply = response["choices"][0]["message"]["content"]
    pieces = []
    for chunk in llm.create_chat_completion(
        messages=MESSAGES, max_tokens=4, temperature=0, stream=True
    ):
        delta = chunk["choices"][0]["delta"]
        if "role" in delta:
            pieces.append(f"[{delta['role']}]")
        pieces.append(delta.get("content", ""))
    return {
        "text": text,
        "streamed": streamed,
        "finish": output["choices"][0]["finish_reason"],
        "total": output["usage"]["total_tokens"],
        "reply": reply,
        "pieces": "".join(pieces),
        "reply_finish": response["choices"][0]["finish_reason"],
    }


class _Bound:
    """The adapter's functions bound to one context, as methods like ``Llama``'s."""

    def __init__(self, oai: Any, ctx: Any) -> None:
        self.create_completion: Callable[..., Any] = functools.partial(oai.create_completion, ctx)
        self.create_chat_completion: Callable[..., Any] = functools.partial(
            oai.create_chat_completion, ctx
        )


def test_code_written_for_llama_cpp_python_runs(oai: Any, ctx: Any) -> None:
    got = _llama_cpp_python_style(_Bound(oai, ctx))
    reply = ctx.chat(MESSAGES, max_tokens=4).text
    assert got == {
        "text": "bcd",
        "streamed": "bcd",
        "finish": "stop",
        "total": 5 + 4,
        "reply": reply,
        "pieces": "[assistant]" + reply,
        "reply_finish": "length",
    }


def test_arguments_are_checked_before_generating(oai: Any, runtime: Any, ctx: Any) -> None:
    with pytest.raises(TypeError, match="suffix"):
        oai.create_completion(ctx, "a", suffix="x")
    with pytest.raises(TypeError, match="echo"):
        oai.create_chat_completion(ctx, MESSAGES, echo=True)
    with pytest.raises(TypeError, match="stream_options"):
        oai.create_completion(ctx, "a", stream=True, stream_options={"usage": True})
    with pytest.raises(ValueError, match=r"Sampling\.top_p"):
        oai.create_completion(ctx, "a", stream=True, top_p=0)
    with pytest.raises(TypeError, match="stop="):
        oai.create_completion(ctx, "a", stream=True, stop=3)
    with pytest.raises(runtime.LlamaUnsupportedError, match="echo with logprobs"):
        oai.create_completion(ctx, "a", echo=True, logprobs=1)
    with pytest.raises(ValueError, match="top_logprobs needs logprobs=True"):
        oai.create_chat_completion(ctx, MESSAGES, top_logprobs=2)


def test_sampling_arguments(oai: Any, ctx: Any) -> None:
    def text(**options: Any) -> str:
        out = oai.create_completion(ctx, "a", max_tokens=8, **options)
        return str(out["choices"][0]["text"])

    hot = {"temperature": 1.5, "top_p": 1.0, "min_p": 0.0, "top_k": 0}
    assert text(seed=7, **hot) == text(seed=7, **hot)
    b = ctx.model.tokenize("b", add_special=False)[-1]
    assert text(temperature=0, logit_bias={b: -float("inf")}) != "bcdefghi"
    assert text(temperature=0, logit_bias={str(b): -float("inf")}) != "bcdefghi"
    assert text(temperature=0, grammar='root ::= "xyz"') == "xyz"


# ---- log-probabilities (the runtime's logprobs=; TokenLogprob, TextPiece.logprobs) ----


def _check_completion_logprobs(logprobs: Any, text: str, base: int, k: int) -> None:
    assert set(logprobs) == LOGPROB_KEYS
    n = len(logprobs["tokens"])
    assert all(len(logprobs[key]) == n for key in LOGPROB_KEYS)
    assert "".join(logprobs["tokens"]) == text
    offsets = [base + len("".join(logprobs["tokens"][:i])) for i in range(n)]
    assert logprobs["text_offset"] == offsets
    for token, logprob, top in zip(
        logprobs["tokens"], logprobs["token_logprobs"], logprobs["top_logprobs"], strict=True
    ):
        assert isinstance(logprob, float) and logprob <= 0.0
        assert top[token] == logprob and len(top) <= k + 1
        assert all(isinstance(key, str) and v <= 0.0 for key, v in top.items())


@pytest.mark.parametrize("prompt", ["a", "~"])  # ASCII, then characters split over tokens
def test_completion_logprobs(oai: Any, ctx: Any, prompt: str) -> None:
    out = oai.create_completion(ctx, prompt, max_tokens=8, temperature=0, logprobs=3)
    result = ctx.generate(prompt, max_tokens=8, logprobs=3)
    logprobs = out["choices"][0]["logprobs"]
    _check_completion_logprobs(logprobs, out["choices"][0]["text"], len(prompt), 3)
    assert logprobs["token_logprobs"] == [lp.logprob for lp in result.logprobs]
    first = result.logprobs[0]
    assert next(iter(logprobs["top_logprobs"][0].values())) == first.top[0][1]
    chunks = list(
        oai.create_completion(ctx, prompt, max_tokens=8, temperature=0, logprobs=3, stream=True)
    )
    joined: dict[str, list[Any]] = {key: [] for key in LOGPROB_KEYS}
    for chunk in chunks[:-1]:
        piece = chunk["choices"][0]["logprobs"]
        for key in LOGPROB_KEYS:
            joined[key] += piece[key]
        assert "".join(piece["tokens"]) == chunk["choices"][0]["text"]
    assert chunks[-1]["choices"][0]["logprobs"] is None
    assert joined == logprobs


def test_completion_logprobs_stop_at_the_stop_sequence(oai: Any, ctx: Any) -> None:
    out = oai.create_completion(ctx, "a", max_tokens=8, temperature=0, logprobs=0, stop="ef")
    logprobs = out["choices"][0]["logprobs"]
    assert out["choices"][0]["text"] == "bcd" and out["usage"]["completion_tokens"] == 5
    assert logprobs["tokens"] == ["b", "c", "d"] and logprobs["text_offset"] == [1, 2, 3]
    assert all(len(top) == 1 for top in logprobs["top_logprobs"])  # the chosen token's only
    chunks = oai.create_completion(
        ctx, "a", max_tokens=8, temperature=0, logprobs=0, stop="ef", stream=True
    )
    tokens = [
        t
        for c in chunks
        if c["choices"][0]["logprobs"]
        for t in c["choices"][0]["logprobs"]["tokens"]
    ]
    assert tokens == ["b", "c", "d"]


def test_chat_logprobs(oai: Any, ctx: Any) -> None:
    out = oai.create_chat_completion(
        ctx, MESSAGES, max_tokens=5, temperature=0, logprobs=True, top_logprobs=2
    )
    logprobs = out["choices"][0]["logprobs"]
    assert set(logprobs) == {"content", "refusal"} and logprobs["refusal"] is None
    content = out["choices"][0]["message"]["content"]
    assert len(logprobs["content"]) == out["usage"]["completion_tokens"] == 5
    assert "".join(e["token"] for e in logprobs["content"]) == content
    assert b"".join(bytes(e["bytes"]) for e in logprobs["content"]) == content.encode()
    for entry in logprobs["content"]:
        assert set(entry) == {"token", "logprob", "bytes", "top_logprobs"}
        assert entry["logprob"] <= 0.0 and len(entry["top_logprobs"]) == 2
        for top in entry["top_logprobs"]:
            assert set(top) == {"token", "logprob", "bytes"} and isinstance(top["bytes"], list)
        values = [top["logprob"] for top in entry["top_logprobs"]]
        assert values == sorted(values, reverse=True)
    chunks = list(
        oai.create_chat_completion(
            ctx, MESSAGES, max_tokens=5, temperature=0, logprobs=True, top_logprobs=2, stream=True
        )
    )
    streamed = [e for c in chunks[1:-1] for e in c["choices"][0]["logprobs"]["content"]]
    assert streamed == logprobs["content"]
    assert chunks[0]["choices"][0]["logprobs"] is None
    assert chunks[-1]["choices"][0]["logprobs"] is None
    without_top = oai.create_chat_completion(
        ctx, MESSAGES, max_tokens=2, temperature=0, logprobs=True
    )
    assert all(e["top_logprobs"] == [] for e in without_top["choices"][0]["logprobs"]["content"])


def _llama_cpp_python_types(work: Path) -> Any:
    """llama-cpp-python 0.3.36's ``llama_types`` module, from the sdist `fetch b11312` caches
    (the module alone: the package's ``__init__`` would load its own libllama)."""
    from bench.calls import extract_llama_cpp_package
    from generator.paths import default_cache_dir

    try:
        package = extract_llama_cpp_package(default_cache_dir(), work)
    except FileNotFoundError as exc:
        pytest.fail(str(exc))
    spec = importlib.util.spec_from_file_location("llama_types", package / "llama_types.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_key_sets_equal_llama_cpp_python_types(oai: Any, ctx: Any, tmp_path: Path) -> None:
    """The keys llama-cpp-python's TypedDicts declare (its 0.3.36 sdist vendors b11312)."""
    types = _llama_cpp_python_types(tmp_path)
    out = oai.create_completion(ctx, "a", max_tokens=2, temperature=0, logprobs=1)
    assert set(out) == set(types.CreateCompletionResponse.__annotations__)
    assert set(out["choices"][0]) == set(types.CompletionChoice.__annotations__)
    assert set(out["usage"]) == set(types.CompletionUsage.__annotations__)
    assert set(out["choices"][0]["logprobs"]) == set(types.CompletionLogprobs.__annotations__)
    chat = oai.create_chat_completion(ctx, MESSAGES, max_tokens=2, temperature=0)
    assert set(chat) == set(types.CreateChatCompletionResponse.__annotations__)
    assert set(chat["choices"][0]) == set(types.ChatCompletionResponseChoice.__annotations__)
    chunk = next(iter(oai.create_chat_completion(ctx, MESSAGES, max_tokens=2, stream=True)))
    assert set(chunk) == set(types.CreateChatCompletionStreamResponse.__annotations__)
