"""The runtime's chat through llama.cpp's chat layer (``Context.chat``, ``stream_chat``,
``generate(json_schema=)``) on the synthetic ``bytes`` models, with templates upstream ships in the
pinned tree's ``models/templates/``.

On these models greedy generation counts up through the byte tokens, so what a template's grammar
forces is visible: functionary v3.2's tool-call grammar (``tool_choice="required"``) starts at the
first generated token and the model's reply is a complete tool call; Qwen 3.5's generation prompt
opens a thinking block, so a reply is reasoning until the template closes it. Every expected value
is computed here: by the parser from the raw text, by plain decoding for every speculative mode,
by ``jsonschema`` for a JSON answer."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.mtp.conftest import CHATML_JINJA
from tests.mtp.test_speculation_composes import MODES, context_factory

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

MESSAGES = [{"role": "user", "content": "Weather?"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather, in a unit",
            "parameters": {
                "type": "object",
                "properties": {"unit": {"type": "string", "enum": ["c", "f"]}},
                "required": ["unit"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "The time",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]
SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "maximum": 9}},
    "required": ["ok", "n"],
    "additionalProperties": False,
}
FORMAT = {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}}


def _template(tree: Path, name: str) -> str:
    return (tree / "models" / "templates" / f"{name}.jinja").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def functionary(tree_pin: Path) -> str:
    return _template(tree_pin, "meetkai-functionary-medium-v3.2")


@pytest.fixture(scope="module")
def qwen35(tree_pin: Path) -> str:
    return _template(tree_pin, "Qwen3.5-4B")


@pytest.fixture(scope="module")
def chat_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``bytes`` models: ``partial`` (an MTP head whose drafts are accepted sometimes),
    ``draft`` (a draft model of the same vocabulary) and the EAGLE-3, DFlash and DSpark drafts
    test_speculation_composes's modes take."""
    from generator.testdrafts import write_test_draft
    from generator.testmodel import BYTES_VOCAB_MIN, write_test_model

    folder = tmp_path_factory.mktemp("chat-models")
    common: dict[str, Any] = {"vocabulary": "bytes", "vocab": BYTES_VOCAB_MIN}
    written = {
        kind: write_test_model(folder / f"{kind}.gguf", kind, **common)
        for kind in ("partial", "draft")
    }
    for kind in ("eagle3-partial", "dflash-partial", "dspark-partial"):
        written[kind] = write_test_draft(folder / f"{kind}.gguf", kind, **common)
    return written


@contextmanager
def _context(runtime: Any, libs: Any, models: dict[str, Path], mode: str) -> Iterator[Any]:
    """A context of speculative ``mode`` (as test_speculation_composes names them) on the
    ``partial`` bytes model."""
    with context_factory(runtime, libs, models, mode, n_ctx=2048) as make:
        yield make()


def test_a_required_tool_call_comes_back_parsed(
    runtime: Any, libs: Any, chat_models: dict[str, Path], functionary: str
) -> None:
    with _context(runtime, libs, chat_models, "none") as ctx:
        # without tools the model writes bytes functionary's format does not have: the parse
        # error carries the generation, unparsed
        with pytest.raises(runtime.LlamaChatParseError, match="peg-native") as refused:
            ctx.chat(MESSAGES, template=functionary, max_tokens=60)
        free = refused.value.result
        result = ctx.chat(
            MESSAGES, template=functionary, tools=TOOLS, tool_choice="required", max_tokens=60
        )
        named = ctx.chat(
            MESSAGES, template=functionary, tools=TOOLS, max_tokens=60,
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
        )  # fmt: skip
    assert len(free.tokens) == 60 and free.text and not isinstance(free, runtime.ChatResult)
    assert result.renderer == "chat-layer" and result.format
    assert result.finish_reason == runtime.FinishReason.END_OF_GENERATION
    (call,) = result.tool_calls
    assert call.name in {"get_weather", "get_time"} and result.text.startswith(call.name)
    arguments = call.parsed_arguments()
    jsonschema.validate(arguments, next(
        t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == call.name
    ))  # fmt: skip
    assert result.content == "" and result.reasoning_content == ""
    (forced,) = named.tool_calls
    assert forced.name == "get_weather" and forced.parsed_arguments()["unit"] in {"c", "f"}


def test_a_streamed_tool_call_joins_to_the_result(
    runtime: Any, libs: Any, chat_models: dict[str, Path], functionary: str
) -> None:
    with _context(runtime, libs, chat_models, "none") as ctx:
        stream = ctx.stream_chat(
            MESSAGES, template=functionary, tools=TOOLS, max_tokens=60,
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
        )  # fmt: skip
        deltas = list(stream)
    result = stream.result
    assert result is not None and len(result.tool_calls) == 1
    calls = [d for d in deltas if d.tool_calls]
    starts = [c for d in calls for c in d.tool_calls if c.name]
    assert [c.name for c in starts] == [result.tool_calls[0].name]
    assert len(calls) > 2  # the arguments come in pieces, as they are written
    arguments = "".join(c.arguments for d in calls for c in d.tool_calls)
    assert arguments == result.tool_calls[0].arguments
    assert "".join(d.text for d in deltas) == result.text


def test_reasoning_is_apart_and_switched_by_the_template(
    runtime: Any, libs: Any, chat_models: dict[str, Path], qwen35: str
) -> None:
    """Qwen 3.5's generation prompt opens a thinking block: the reply (which never closes it)
    is reasoning; with reasoning=False the template closes it empty and the reply is content."""
    with _context(runtime, libs, chat_models, "none") as ctx:
        thinking = ctx.chat(MESSAGES, template=qwen35, max_tokens=12)
        stream = ctx.stream_chat(MESSAGES, template=qwen35, max_tokens=12)
        deltas = list(stream)
        answer = ctx.chat(MESSAGES, template=qwen35, max_tokens=12, reasoning=False)
        kept = ctx.chat(MESSAGES, template=qwen35, max_tokens=12, reasoning_format="none")
    assert thinking.text == answer.text  # the same tokens, read two ways
    assert thinking.reasoning_content and thinking.content == ""
    assert thinking.reasoning_content in thinking.text
    assert answer.content == thinking.reasoning_content and answer.reasoning_content == ""
    assert "".join(d.reasoning_content for d in deltas) == thinking.reasoning_content
    assert all(d.content == "" for d in deltas)
    assert kept.reasoning_content == "" and thinking.reasoning_content in kept.content


def test_a_json_answer_is_valid_against_its_schema(
    runtime: Any, libs: Any, chat_models: dict[str, Path], qwen35: str
) -> None:
    with _context(runtime, libs, chat_models, "none") as ctx:
        generated = ctx.generate("x", json_schema=SCHEMA, max_tokens=60)
        chatted = ctx.chat(
            MESSAGES, template=qwen35, response_format=FORMAT, reasoning=False, max_tokens=60
        )
        anything = ctx.chat(
            MESSAGES, template=qwen35, response_format={"type": "json_object"}, reasoning=False,
            max_tokens=60,
        )  # fmt: skip
        free = ctx.generate("x", max_tokens=20)
    assert generated.finish_reason == runtime.FinishReason.END_OF_GENERATION
    jsonschema.validate(json.loads(generated.text), SCHEMA)
    jsonschema.validate(json.loads(chatted.content), SCHEMA)
    # any object: this model writes one long key (its bytes in order) until max_tokens
    assert anything.content.startswith('{ "#$%&') and free.text[:3] not in anything.content
    with pytest.raises(json.JSONDecodeError):
        json.loads(free.text)  # the schema made the difference


@pytest.mark.parametrize("mode", MODES)
def test_every_speculative_mode_gives_plain_decodings_reply_under_a_grammar(
    runtime: Any, libs: Any, chat_models: dict[str, Path], functionary: str, qwen35: str, mode: str
) -> None:
    """A draft the chat's grammar rejects costs only its verification: a required tool call and a
    JSON-schema answer come out as plain decoding's."""

    def replies(ctx: Any) -> list[Any]:
        return [
            ctx.chat(
                MESSAGES, template=functionary, tools=TOOLS, tool_choice="required", max_tokens=60
            ),
            ctx.chat(
                MESSAGES, template=qwen35, response_format=FORMAT, reasoning=False, max_tokens=60
            ),
            ctx.generate("x", json_schema=SCHEMA, max_tokens=60),
        ]

    with _context(runtime, libs, chat_models, "none") as ctx:
        plain = replies(ctx)
    with _context(runtime, libs, chat_models, mode) as ctx:
        ours = replies(ctx)
    for mine, theirs in zip(ours, plain, strict=True):
        assert mine.tokens == theirs.tokens and mine.text == theirs.text
    assert ours[0].tool_calls == plain[0].tool_calls and len(ours[0].tool_calls) == 1
    jsonschema.validate(json.loads(ours[1].content), SCHEMA)
    # ngram-mod's n-grams are longer than anything these short replies repeat: it drafts
    # nothing here (its drafts under a grammar: test_speculation_composes.py)
    if mode not in ("none", "ngram-mod"):
        assert sum(r.metrics.drafted_tokens for r in ours) > 0


def test_bad_requests_are_typed_errors_and_the_context_stays_usable(
    runtime: Any, libs: Any, chat_models: dict[str, Path], functionary: str, qwen35: str
) -> None:
    with _context(runtime, libs, chat_models, "none") as ctx:
        before = ctx.chat(MESSAGES, template=qwen35, max_tokens=8)
        unknown_tool = {"type": "function", "function": {"name": "nope"}}
        bad_schema = {"schema": {"type": "object", "properties": 5}}
        grammar = 'root ::= "a"'
        cases: list[tuple[type[Exception], str, dict[str, Any]]] = [
            (ValueError, "Invalid tool_choice: sometimes",
             {"tools": TOOLS, "tool_choice": "sometimes"}),
            (ValueError, "which tools= does not have",
             {"tools": TOOLS, "tool_choice": unknown_tool}),
            (runtime.LlamaUnsupportedError, "neither describes tools nor writes tool calls",
             {"template": CHATML_JINJA, "tools": TOOLS}),
            (runtime.LlamaUnsupportedError, "builtin format",
             {"template": "chatml", "tools": TOOLS}),
            (runtime.LlamaSchemaError, "properties must be an object",
             {"response_format": {"type": "json_schema", "json_schema": bad_schema}}),
            (ValueError, "'yaml' is not one of", {"response_format": {"type": "yaml"}}),
            (ValueError, "Unknown reasoning format", {"reasoning_format": "bogus"}),
            (runtime.ChatTemplateError, "chat template",
             {"template": "{{ raise_exception('no way') }}"}),
            (runtime.ChatTemplateError, "Unexpected token", {"template": "{% for %}"}),
            (ValueError, "not with tools or a JSON schema",
             {"grammar": grammar, "response_format": FORMAT}),
            (TypeError, "media as content parts", {"media": [b"x"]}),
        ]  # fmt: skip
        for error, message, options in cases:
            request = {"template": qwen35, "max_tokens": 8, **options}
            with pytest.raises(error, match=message):
                ctx.chat(MESSAGES, **request)
        with pytest.raises(runtime.LlamaSchemaError, match="cannot resolve"):
            ctx.generate("x", json_schema={"$ref": "#/nope"})
        with pytest.raises(ValueError, match="grammar= or json_schema="):
            ctx.generate("x", json_schema=SCHEMA, grammar=grammar)
        after = ctx.chat(MESSAGES, template=qwen35, max_tokens=8)
    assert after.tokens == before.tokens


def test_the_builtin_renderer_is_named_and_refuses_what_only_the_layer_does(
    runtime: Any, libs: Any, chat_models: dict[str, Path]
) -> None:
    with _context(runtime, libs, chat_models, "none") as ctx:
        builtin = ctx.chat(MESSAGES, template="chatml", max_tokens=6)
        text = ctx.model.apply_chat_template(MESSAGES, template="chatml")
        direct = ctx.generate(ctx.model.tokenize(text, parse_special=True), max_tokens=6)
        with pytest.raises(runtime.LlamaUnsupportedError, match="reasoning"):
            ctx.chat(MESSAGES, template="chatml", reasoning=False)
    assert builtin.renderer == "builtin-template" and builtin.tokens == direct.tokens
    assert builtin.content == builtin.text and builtin.format == ""


def test_libraries_without_the_layer_chat_with_the_builtin_template(
    runtime: Any, libs: Any, byte_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Libraries whose wrapper has no chat layer (a release built before it; none of those
    loads the test vocabulary, so the layer's absence is what ``Model.chat_templates`` reports
    for them, stood in here): chat renders with the builtin template, and what only the layer
    does is refused, naming why."""
    why = "this llama_mtp wrapper has no chat layer (built before llama-bindgen added it)"

    def no_layer(self: Any, template: str | None = None) -> Any:
        raise runtime.LlamaUnsupportedError(why)

    with runtime.Model(byte_models["agree"], libs=libs) as model:
        with runtime.Context(model, n_ctx=512) as ctx:
            layer = ctx.chat(MESSAGES, max_tokens=6)
            monkeypatch.setattr(runtime.Model, "chat_templates", no_layer)
            builtin = ctx.chat(MESSAGES, max_tokens=6)
            with pytest.raises(runtime.LlamaUnsupportedError, match=r"lack .*no chat layer"):
                ctx.chat(MESSAGES, tools=TOOLS, max_tokens=6)
    assert layer.renderer == "chat-layer" and builtin.renderer == "builtin-template"
    assert builtin.tokens == layer.tokens  # chatml, recognised by llama_chat_apply_template


LAZY = 'root ::= "fgh" [0-9] [0-9] [0-9] "xyz"'


@pytest.mark.parametrize("mode", MODES)
def test_a_lazy_grammar_triggered_mid_reply_gives_plain_decodings_output_with_every_mode(
    runtime: Any, libs: Any, chat_models: dict[str, Path], mode: str
) -> None:
    """A lazy grammar (as a chat's tool-call grammar is) waits for its trigger, then constrains:
    the model counts up through the bytes, free until it writes "fgh", then three digits and
    "xyz" (where the grammar ends, so does the generation); every speculative mode gives plain
    decoding's tokens, drafts of the free part and of the constrained part alike."""
    grammar = runtime.Grammar(LAZY, lazy=True, patterns=(r"[\s\S]*?(fgh)",))
    prompt = "abcdefghabcd"  # a run the n-gram strategies find again
    with _context(runtime, libs, chat_models, "none") as ctx:
        plain = ctx.generate(prompt, max_tokens=24, grammar=grammar)
        free = ctx.generate(prompt, max_tokens=24)
    with _context(runtime, libs, chat_models, mode) as ctx:
        ours = ctx.generate(prompt, max_tokens=24, grammar=grammar)
    assert free.text.startswith("efghij")
    assert re.fullmatch(r"efgh[0-9]{3}xyz", plain.text), plain.text
    assert plain.finish_reason == runtime.FinishReason.END_OF_GENERATION
    assert ours.tokens == plain.tokens and ours.text == plain.text
    if mode not in ("none", "ngram-mod"):  # ngram-mod: see the test above
        assert ours.metrics.drafted_tokens > 0
