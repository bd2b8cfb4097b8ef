"""llama.cpp's chat layer through the wrapper (``runtime.ChatTemplates``, ``llama_mtp_chat_*``), on
upstream's own material: every template the pinned tree ships in ``models/templates/`` renders a
conversation, with and without tools; tool calls and reasoning written in a template's own format
come back parsed, in full and while still being written; misuse is a typed error. (The C-level
statuses: tests/native/test_wrapper_errors.py; schema-constrained generation on a real model:
tests/realmodel/test_gemma_chat_layer.py.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "It is 4."},
    {"role": "user", "content": "And 3+3?"},
]
TOOL = "sum_two_numbers"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "sum_two_numbers",
            "description": "Add two numbers",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        },
    }
]


def _templates(tree: Path) -> list[Path]:
    found = sorted((tree / "models" / "templates").glob("*.jinja"))
    assert len(found) > 50, "the tree's models/templates/ went missing"
    return found


def test_every_template_upstream_ships_renders_a_conversation(
    runtime: Any, libs: Any, tree_pin: Path
) -> None:
    """Each template renders the 4-message conversation, and again with a tool: every user turn's
    text is in the prompt, and a request with tools names the tool (in the prompt, or in a
    grammar that makes the model call it) exactly where llama.cpp finds the template describes
    tools or writes tool calls (it adds the description to the system turn of the second kind):
    llama.cpp drops the tools of the others without a word (the runtime's to refuse)."""
    failures = []
    for path in _templates(tree_pin):
        try:
            with runtime.ChatTemplates(libs, template=path.read_text(encoding="utf-8")) as t:
                caps = t.info()["caps"]
                supports_tools = caps["supports_tools"] or caps["supports_tool_calls"]
                plain = t.apply({"messages": CONVERSATION})
                tools = t.apply({"messages": CONVERSATION, "tools": TOOLS})
        except Exception as exc:  # collected: the assertion names every template that failed
            failures.append(f"{path.stem}: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        for rendered in (plain, tools):
            missing = [
                m["content"] for m in CONVERSATION[1::2] if m["content"] not in rendered.prompt
            ]
            if missing:
                failures.append(f"{path.stem}: {missing} not in the prompt")
        named = TOOL in tools.prompt or TOOL in tools.grammar
        if named != supports_tools:
            failures.append(f"{path.stem}: tool named {named}, tools supported {supports_tools}")
    assert failures == []


def _rendered(runtime: Any, libs: Any, tree: Path, name: str, **request: Any) -> Any:
    source = (tree / "models" / "templates" / f"{name}.jinja").read_text(encoding="utf-8")
    with runtime.ChatTemplates(libs, template=source) as t:
        return t.apply({"messages": CONVERSATION[:2], **request})


@pytest.mark.parametrize(
    ("template", "written"),
    [
        # Hermes' JSON tool call
        (
            "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
            '<tool_call>\n{"name": "sum_two_numbers", "arguments": {"a": 2, "b": 2}}\n</tool_call>',
        ),
        # Qwen 3.5's XML function call, after the reasoning the generation prompt opened
        (
            "Qwen3.5-4B",
            "Adding.\n</think>\n\n<tool_call>\n<function=sum_two_numbers>\n<parameter=a>\n2\n</parameter>\n"
            "<parameter=b>\n2\n</parameter>\n</function>\n</tool_call>",
        ),
    ],
)
def test_a_tool_call_in_the_templates_format_is_parsed(
    runtime: Any, libs: Any, tree_pin: Path, template: str, written: str
) -> None:
    chat = _rendered(runtime, libs, tree_pin, template, tools=TOOLS, reasoning_format="auto")
    assert chat.grammar_lazy and chat.grammar_triggers  # the grammar waits for the call
    message = chat.parse(written)
    assert [c["name"] for c in message["tool_calls"]] == [TOOL]
    assert json.loads(message["tool_calls"][0]["arguments"]) == {"a": 2, "b": 2}
    assert message["content"] == ""
    # while it is written: the call is known before its arguments are complete
    half = chat.parse(written[: written.index("2") + 1], partial=True)
    assert [c["name"] for c in half["tool_calls"]] == [TOOL]
    with pytest.raises(json.JSONDecodeError):
        json.loads(half["tool_calls"][0]["arguments"])


# Parse cases of llama.cpp's own tests (tests/test-chat.cpp at b11549: its peg_tester cases for
# these templates): the model's text, the request's options, and the message upstream expects
# (content, reasoning, tool calls with their arguments as JSON). Test data, not code.
SPECIAL = {
    "type": "function",
    "function": {
        "name": "special_function",
        "description": "I'm special",
        "parameters": {
            "type": "object",
            "properties": {"arg1": {"type": "integer", "description": "The arg."}},
            "required": ["arg1"],
        },
    },
}
SPECIAL_OPT = {
    "type": "function",
    "function": {
        "name": "special_function_with_opt",
        "description": "I'm special but have optional stuff",
        "parameters": {
            "type": "object",
            "properties": {
                "arg1": {"type": "integer", "description": "The arg."},
                "arg2": {"type": "integer", "description": "The optional arg."},
            },
            "required": ["arg1"],
        },
    },
}
CALL = (
    "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n"
    "</tool_call>"
)
UPSTREAM_PARSES: list[tuple[str, dict[str, Any], str, str, str, list[tuple[str, Any]]]] = [
    ("Qwen3.5-4B", {"reasoning_format": "auto", "enable_thinking": True},
     "I'm\nthinking\n</think>\n\nHello, world!\nWhat's up?",
     "Hello, world!\nWhat's up?", "I'm\nthinking", []),
    ("Qwen3.5-4B", {"reasoning_format": "none", "enable_thinking": True},
     "I'm\nthinking\n</think>\n\nHello, world!\nWhat's up?",
     "<think>\nI'm\nthinking\n</think>\n\nHello, world!\nWhat's up?", "", []),
    ("Qwen3.5-4B", {"reasoning_format": "auto", "enable_thinking": False, "tools": [SPECIAL]},
     CALL, "", "", [("special_function", {"arg1": 1})]),
    ("Qwen3.5-4B", {"reasoning_format": "auto", "tools": [SPECIAL]},
     "I'm\nthinking\n</think>\n\n" + CALL, "", "I'm\nthinking",
     [("special_function", {"arg1": 1})]),
    ("Qwen3.5-4B", {"reasoning_format": "auto", "enable_thinking": False,
                    "parallel_tool_calls": True, "tools": [SPECIAL, SPECIAL_OPT]},
     CALL + "\n<tool_call>\n<function=special_function_with_opt>\n<parameter=arg1>\n1\n"
     "</parameter>\n<parameter=arg2>\n2\n</parameter>\n</function>\n</tool_call>", "", "",
     [("special_function", {"arg1": 1}), ("special_function_with_opt", {"arg1": 1, "arg2": 2})]),
    ("LFM2.5-8B-A1B", {}, "Hello, world!\nWhat's up?", "Hello, world!\nWhat's up?", "", []),
    ("LFM2.5-8B-A1B", {"tools": [SPECIAL]},
     "<|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|>", "", "",
     [("special_function", {"arg1": 1})]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("template", "options", "text", "content", "reasoning", "calls"), UPSTREAM_PARSES
)
def test_upstreams_own_parse_cases(
    runtime: Any,
    libs: Any,
    tree_pin: Path,
    template: str,
    options: dict[str, Any],
    text: str,
    content: str,
    reasoning: str,
    calls: list[tuple[str, Any]],
) -> None:
    chat = _rendered(runtime, libs, tree_pin, template, **options)
    message = chat.parse(text)
    # upstream's peg tests compare content and reasoning with whitespace at their ends stripped
    assert message["content"].strip() == content
    assert message["reasoning_content"].strip() == reasoning
    got = [(c["name"], json.loads(c["arguments"])) for c in message["tool_calls"]]
    assert got == calls


def test_reasoning_is_separated_from_the_answer(runtime: Any, libs: Any, tree_pin: Path) -> None:
    chat = _rendered(runtime, libs, tree_pin, "Qwen-Qwen3-0.6B", reasoning_format="auto")
    message = chat.parse("<think>\nTwo and two.\n</think>\n\nIt is 4.")
    assert message["reasoning_content"].strip() == "Two and two."
    assert message["content"] == "It is 4."
    # with reasoning_format none the thinking stays in the content, as llama.cpp's server does
    raw = _rendered(runtime, libs, tree_pin, "Qwen-Qwen3-0.6B", reasoning_format="none")
    kept = raw.parse("<think>\nTwo and two.\n</think>\n\nIt is 4.")
    assert "Two and two." in kept["content"] and kept["reasoning_content"] == ""


def test_thinking_off_is_rendered_by_the_template(runtime: Any, libs: Any, tree_pin: Path) -> None:
    """enable_thinking reaches the template: Qwen 3.5 opens a thinking block, or closes it empty."""
    on = _rendered(runtime, libs, tree_pin, "Qwen3.5-4B", enable_thinking=True)
    off = _rendered(runtime, libs, tree_pin, "Qwen3.5-4B", enable_thinking=False)
    assert on.prompt.endswith("<think>\n") and on.supports_thinking
    assert off.prompt != on.prompt and "</think>" in off.prompt[len(on.prompt) - 10 :]


def test_misuse_is_a_typed_error_and_the_templates_stay_usable(runtime: Any, libs: Any) -> None:
    template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    with pytest.raises(runtime.ChatTemplateError, match="chat template"):
        runtime.ChatTemplates(libs, template="{% for m in messages %}")
    with runtime.ChatTemplates(libs, template=template) as t:
        with pytest.raises(ValueError, match="tool_choice"):
            t.apply({"messages": CONVERSATION, "tool_choice": "sometimes"})
        with pytest.raises(ValueError, match="messages"):
            t.apply({"messages": "not a list"})
        with pytest.raises(runtime.LlamaSchemaError, match="definitions"):
            t.apply({"messages": CONVERSATION, "json_schema": {"$ref": "#/definitions/none"}})
        assert t.apply({"messages": CONVERSATION}).prompt.startswith("You are a helpful")
    closed = runtime.ChatTemplates(libs, template=template)
    closed.close()
    with pytest.raises(runtime.LlamaClosedError):
        closed.apply({"messages": CONVERSATION})


def test_a_schema_becomes_llamas_grammar(runtime: Any, libs: Any) -> None:
    grammar = runtime.json_schema_to_grammar(
        libs, {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    )
    assert "root ::=" in grammar and '"\\"n\\""' in grammar
    with pytest.raises(runtime.LlamaSchemaError):
        runtime.json_schema_to_grammar(libs, {"$ref": "#/definitions/none"})


def _system_in_first_user_turn(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """llama.cpp's polyfill for a template without a system role: the system text joins the
    first user turn, a newline between."""
    system, user, *rest = messages
    return [{"role": "user", "content": f"{system['content']}\n{user['content']}"}, *rest]


def _translategemma(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """TranslateGemma's handler (common/parsers/translate-gemma.cpp): each user turn becomes one
    typed text part with the languages, en-GB when chat_template_kwargs names none."""
    return [
        {**m, "content": [{"type": "text", "text": m["content"], "source_lang_code": "en-GB",
                           "target_lang_code": "en-GB"}]}
        if m["role"] == "user" else m
        for m in _system_in_first_user_turn(messages)
    ]  # fmt: skip


# The requests every template renders, against the reference: the conversation, with a tool,
# and with thinking switched off (llama.cpp's request field, the reference's variables).
KINDS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "plain": ({}, {}),
    "tools": ({"tools": TOOLS}, {"tools": TOOLS}),
    "no thinking": ({"enable_thinking": False}, {"enable_thinking": False}),
}


@dataclass(frozen=True)
class Explained:
    """Why llama.cpp's rendering is not the template run by jinja2 on the request as it is, and
    the reference's input made the way llama.cpp makes its own (``messages``, extra
    ``variables``) or jinja2 made to run the language as llama.cpp's engine does (``quirks``,
    see chat_reference.QUIRKS), for the request ``kinds`` named: the test renders the reference
    so and requires equality again."""

    reason: str
    messages: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] = lambda ms: ms
    variables: dict[str, Any] = field(default_factory=dict)
    quirks: frozenset[str] = frozenset()
    kinds: frozenset[str] = frozenset(KINDS)


EXPLAINED: dict[str, Explained] = {
    "google-gemma-2-2b-it": Explained(
        "no system role (its template raises on one): llama.cpp merges it into the user turn",
        _system_in_first_user_turn,
    ),
    "google-translategemma-4b-it": Explained(
        "llama.cpp's TranslateGemma handler rewrites user turns into the template's typed parts",
        _translategemma,
    ),
    "IFM-K2-Horizon": Explained(
        "the template requires a thinking field on assistant turns; llama.cpp's messages carry "
        "reasoning_content (empty) on every one",
        lambda ms: [{**m, "reasoning_content": ""} if m["role"] == "assistant" else m for m in ms],
    ),
    "fireworks-ai-llama-3-firefunction-v2": Explained(
        "the template prints `functions`, which no one sets: llama.cpp's Jinja engine renders an "
        "undefined value as empty text where jinja2 raises",
        variables={"functions": ""},
    ),
    "CohereForAI-c4ai-command-r-plus-tool_use": Explained(
        "the template reads Cohere's tool fields (description, parameter_definitions) on OpenAI "
        "tools, which lack them: llama.cpp's engine reads undefined values as nothing, also in "
        "`+`, where jinja2 raises",
        quirks=frozenset({"undefined is empty"}),
        kinds=frozenset({"tools"}),
    ),
    "llama-cpp-deepseek-r1": Explained(
        "`tools | map(attribute='function') | tojson`: jinja2's map gives a generator, which "
        "tojson refuses; llama.cpp's engine gives a list",
        quirks=frozenset({"filters give lists"}),
        kinds=frozenset({"tools"}),
    ),
    "meetkai-functionary-medium-v3.1": Explained(
        "`'...'|safe + t | tojson`: jinja2's safe makes Markup, and Markup + text HTML-escapes the "
        "tool's JSON (&#34;); llama.cpp's engine has no Markup",
        quirks=frozenset({"safe is text"}),
        kinds=frozenset({"tools"}),
    ),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_template_renders_as_jinja2_does(
    runtime: Any, libs: Any, tree_pin: Path, kind: str
) -> None:
    """The reference (tests/mtp/chat_reference.py: jinja2's sandbox as transformers runs
    templates, with llama.cpp's variables) gives llama.cpp's prompt for every template of the
    tree, for each kind of request, the ones in EXPLAINED after their stated adjustment; an
    explained template that renders equal without it fails too (the explanation went stale)."""
    import datetime

    from tests.mtp.chat_reference import llama_variables, render

    request, extra = KINDS[kind]
    differences = []
    for path in _templates(tree_pin):
        source = path.read_text(encoding="utf-8")
        with runtime.ChatTemplates(libs, template=source) as t:
            prompt = t.apply({"messages": CONVERSATION, **request}).prompt
        variables = llama_variables(datetime.datetime.now()) | extra
        plain = _reference_or_error(render, source, CONVERSATION, frozenset(), variables)
        explained = EXPLAINED.get(path.stem)
        if explained is None or kind not in explained.kinds:
            if plain != prompt:
                differences.append(f"{path.stem}: unexplained difference: {plain[:300]!r}")
            continue
        adjusted = _reference_or_error(
            render, source, explained.messages(CONVERSATION), explained.quirks,
            variables | explained.variables,
        )  # fmt: skip
        if plain == prompt:
            differences.append(f"{path.stem}: explained, but equal without the adjustment")
        elif adjusted != prompt:
            differences.append(
                f"{path.stem}: still differs after the adjustment: {adjusted[:300]!r}"
            )
    assert set(EXPLAINED) <= {p.stem for p in _templates(tree_pin)}
    assert differences == []


def _reference_or_error(
    render: Any, source: str, messages: Any, quirks: frozenset[str], variables: Any
) -> str:
    try:
        text: str = render(source, messages, quirks, **variables)
    except Exception as exc:  # a template that raises under jinja2: its message stands in
        return f"<raised {type(exc).__name__}: {exc}>"
    return text
