"""JSON schemas through llama.cpp's own converter (``runtime.json_schema_to_grammar``) constrain a
real generation (Gemma 3 270M Q4_K_M; its GGUF has no chat template, so llama.cpp's chat layer
renders these prompts in ChatML, its choice for such a model) to JSON valid against the schema,
checked by the ``jsonschema`` package; with the n-gram strategies the constrained output is plain
decoding's token for token. Through the runtime's own chat (``Context.chat``, templates upstream
ships in the pinned tree): a required tool call comes back parsed, its arguments valid against
the tool's parameters, and a ``response_format`` answer is valid JSON, with the n-gram strategies
and draft-simple (the model drafting for itself) as without.

The shapes are those llama.cpp's ``tests/test-json-schema-to-grammar.cpp`` covers: required and
optional properties, nested objects, arrays with bounds, enums, constants, integer ranges, string
lengths and patterns, anyOf, and no additional properties. Contexts decode one token per
micro-batch on weights that are not repacked (see test_gemma_chat.py: then a token's logits do
not depend on the batch it was computed in, and speculative output must equal plain output)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

MAX_TOKENS = 160
NAME = {"type": "string", "minLength": 1, "maxLength": 12}
SCHEMAS: dict[str, dict[str, Any]] = {
    "required and optional": {
        "type": "object",
        "properties": {"name": NAME, "age": {"type": "integer"}, "nickname": NAME},
        "required": ["name", "age"],
        "additionalProperties": False,
    },
    "nested object": {
        "type": "object",
        "properties": {
            "city": NAME,
            "location": {
                "type": "object",
                "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                "required": ["lat", "lon"],
            },
        },
        "required": ["city", "location"],
    },
    "bounded array": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4},
    "enum and const": {
        "type": "object",
        "properties": {
            "color": {"enum": ["red", "green", "blue"]},
            "kind": {"const": "paint"},
        },
        "required": ["color", "kind"],
    },
    "integer range": {"type": "integer", "minimum": 10, "maximum": 99},
    "pattern": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
    "any of": {"anyOf": [{"type": "boolean"}, {"type": "null"}, NAME]},
}


@pytest.fixture(scope="module")
def gemma_flat(runtime: Any, libs: Any, gemma_model: Path) -> Iterator[Any]:
    with runtime.Model(gemma_model, libs=libs, use_extra_bufts=False) as model:
        yield model


@pytest.fixture(scope="module")
def templates(runtime: Any, libs: Any, gemma_flat: Any) -> Iterator[Any]:
    with runtime.ChatTemplates(libs, gemma_flat.native.pointer) as found:
        yield found


def _prompt(templates: Any, schema: dict[str, Any]) -> str:
    ask = f"Reply with one JSON value matching this schema: {json.dumps(schema)}"
    rendered = templates.apply({"messages": [{"role": "user", "content": ask}]})
    prompt: str = rendered.prompt
    return prompt


def _generate(runtime: Any, model: Any, prompt: str, grammar: str, modes: tuple[str, ...]) -> Any:
    spec = runtime.SpeculativeDecoding(strategies=modes) if modes else None
    with runtime.Context(model, n_ctx=1024, n_ubatch=1, speculative=spec) as ctx:
        return ctx.generate(prompt, max_tokens=MAX_TOKENS, grammar=grammar)


@pytest.mark.parametrize("shape", sorted(SCHEMAS))
def test_a_schema_constrains_gemma_to_valid_json(
    runtime: Any, libs: Any, gemma_flat: Any, templates: Any, shape: str
) -> None:
    schema = SCHEMAS[shape]
    grammar = runtime.json_schema_to_grammar(libs, schema)
    result = _generate(runtime, gemma_flat, _prompt(templates, schema), grammar, ())
    assert result.finish_reason != "length", f"{shape}: unfinished after {MAX_TOKENS} tokens"
    jsonschema.validate(json.loads(result.text), schema)


@pytest.mark.parametrize("mode", ["ngram-mod", "ngram-simple", "ngram-map-k"])
def test_speculation_under_a_schema_gives_plain_decodings_tokens(
    runtime: Any, libs: Any, gemma_flat: Any, templates: Any, mode: str
) -> None:
    schema = SCHEMAS["bounded array"]
    grammar = runtime.json_schema_to_grammar(libs, schema)
    prompt = _prompt(templates, schema)
    plain = _generate(runtime, gemma_flat, prompt, grammar, ())
    drafted = _generate(runtime, gemma_flat, prompt, grammar, (mode,))
    assert list(drafted.tokens) == list(plain.tokens)
    jsonschema.validate(json.loads(drafted.text), schema)


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "maxLength": 20},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city", "unit"],
            },
        },
    }
]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
# Gemma 3 270M has no MTP head (draft-mtp: tests/mtp/test_chat_runtime.py, synthetic models);
# draft-simple drafts with the model itself
CHAT_MODES = ("none", "ngram-mod", "ngram-simple", "ngram-map-k", "ngram-cache", "draft-simple")


def _template(tree: Path, name: str) -> str:
    return (tree / "models" / "templates" / f"{name}.jinja").read_text(encoding="utf-8")


def _chat(runtime: Any, model: Any, mode: str, messages: Any, **options: Any) -> Any:
    spec = None
    if mode == "draft-simple":
        spec = runtime.SpeculativeDecoding(strategies=(mode,), draft_model=model)
    elif mode != "none":
        spec = runtime.SpeculativeDecoding(strategies=(mode,))
    with runtime.Context(model, n_ctx=2048, n_ubatch=1, speculative=spec) as ctx:
        return ctx.chat(messages, max_tokens=80, **options)


@pytest.fixture(scope="module")
def plain_tool_call(runtime: Any, gemma_flat: Any, tree_pin: Path) -> Any:
    qwen3 = _template(tree_pin, "Qwen-Qwen3-0.6B")
    return _chat(
        runtime, gemma_flat, "none", ASK,
        template=qwen3, tools=TOOLS, tool_choice="required", reasoning=False,
    )  # fmt: skip


@pytest.mark.parametrize("mode", CHAT_MODES)
def test_gemma_calls_a_tool_through_the_runtimes_chat(
    runtime: Any, gemma_flat: Any, tree_pin: Path, plain_tool_call: Any, mode: str
) -> None:
    """Qwen 3's template (Hermes-style ``<tool_call>`` JSON) on Gemma: the required call's grammar
    makes the model write calls, which come back parsed."""
    result = _chat(
        runtime, gemma_flat, mode, ASK,
        template=_template(tree_pin, "Qwen-Qwen3-0.6B"), tools=TOOLS, tool_choice="required",
        reasoning=False,
    )  # fmt: skip
    assert result.renderer == "chat-layer" and result.tool_calls
    parameters = TOOLS[0]["function"]["parameters"]
    for call in result.tool_calls:
        assert call.name == "get_weather"
        jsonschema.validate(call.parsed_arguments(), parameters)
    assert result.tokens == plain_tool_call.tokens
    assert result.tool_calls == plain_tool_call.tool_calls


def _answer(runtime: Any, model: Any, tree: Path, mode: str) -> Any:
    """Gemma 2's template (Gemma 3's turn format) and OpenAI's ``response_format``."""
    schema = SCHEMAS["bounded array"]
    ask = [{"role": "user", "content": f"Reply with JSON matching: {json.dumps(schema)}"}]
    fmt = {"type": "json_schema", "json_schema": {"name": "numbers", "schema": schema}}
    gemma2 = _template(tree, "google-gemma-2-2b-it")
    return _chat(runtime, model, mode, ask, template=gemma2, response_format=fmt)


@pytest.fixture(scope="module")
def plain_answer(runtime: Any, gemma_flat: Any, tree_pin: Path) -> Any:
    return _answer(runtime, gemma_flat, tree_pin, "none")


@pytest.mark.parametrize("mode", CHAT_MODES)
def test_gemma_answers_a_response_format_through_the_runtimes_chat(
    runtime: Any, gemma_flat: Any, tree_pin: Path, plain_answer: Any, mode: str
) -> None:
    result = _answer(runtime, gemma_flat, tree_pin, mode)
    jsonschema.validate(json.loads(result.content), SCHEMAS["bounded array"])
    assert result.tokens == plain_answer.tokens and result.content == plain_answer.content
