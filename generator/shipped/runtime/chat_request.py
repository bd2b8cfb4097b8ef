"""A chat request, from messages to a parsed reply.

Two renderers, and each :class:`ChatResult` names the one that ran (``renderer``):

* ``"chat-layer"`` (the default wherever the libraries have it): llama.cpp's own chat layer
  (:mod:`.chat_layer`) runs the template's Jinja (the model's own, or ``template=`` given as
  Jinja text) as llama.cpp's server of the same release does: tools, tool choice, reasoning,
  template keyword arguments and JSON schemas go into the prompt and into a grammar (lazy, with
  its triggers, for tool calls a model may or may not make), and the reply is parsed back into
  content, reasoning and tool calls.
* ``"builtin-template"``: ``llama_chat_apply_template``, which recognises a template among the
  formats llama.cpp has written in C++ and runs no Jinja. It runs when ``template=`` is a name
  such as ``"chatml"``, or when the libraries have no chat layer (a release without the
  wrapper, or one built before the layer); asking then for what only the layer does (tools,
  ``response_format``, reasoning, template keyword arguments) is LlamaUnsupportedError.

A model without a template of its own needs ``template=`` (ChatTemplateError): llama.cpp's chat
layer would fall back to ChatML, which is not what the model was trained on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, cast

from ..errors import LlamaChatParseError, LlamaUnsupportedError
from ..outputs import TextPiece, TokenLogprob
from .chat_layer import ChatTemplates, RenderedChat
from .generation import GenerateOptions, Plan, tokenize_media
from .media import DEFAULT_MARKER, chat_media, message_media
from .results import ChatMessage, ChatMessages, ChatTemplateError, GenerationResult
from .sampling import Grammar

if TYPE_CHECKING:
    from .media import MediaInput, MediaPrompt
    from .model import Model
    from .speculative import Sidecar

CHAT_LAYER: Final = "chat-layer"
BUILTIN_TEMPLATE: Final = "builtin-template"


class ChatOptions(GenerateOptions, total=False):
    """:class:`GenerateOptions` and the chat's own (see :meth:`Context.chat`): ``template`` (a
    Jinja text, or a builtin format's name); ``tools`` (OpenAI function definitions);
    ``tool_choice`` (``"auto"``, ``"none"``, ``"required"`` or one named function:
    ``{"type": "function", "function": {"name": ...}}``); ``parallel_tool_calls``;
    ``response_format`` (OpenAI's ``json_object``, ``json_schema`` or ``text``; ``json_schema=``
    is a shorthand); ``reasoning`` (the template's thinking switch, ``enable_thinking``);
    ``reasoning_format`` (llama.cpp's name, default ``"deepseek"``: reasoning apart, as
    llama.cpp's server gives it; ``"none"`` keeps it in the content); ``chat_template_kwargs``
    (more template variables)."""

    template: str | None
    tools: Sequence[Mapping[str, Any]] | None
    tool_choice: str | Mapping[str, Any] | None
    parallel_tool_calls: bool | None
    response_format: Mapping[str, Any] | None
    reasoning: bool | None
    reasoning_format: str | None
    chat_template_kwargs: Mapping[str, Any] | None


# what only llama.cpp's chat layer does
LAYER_ONLY: Final = (
    "tools", "tool_choice", "parallel_tool_calls", "response_format", "json_schema", "reasoning",
    "reasoning_format", "chat_template_kwargs",
)  # fmt: skip
_CHAT_KEYS: Final = frozenset(ChatOptions.__annotations__) - frozenset(
    GenerateOptions.__annotations__
)
# what llama.cpp's parsers trim (C's isspace)
_WHITESPACE: Final = " \t\n\v\f\r"
# an expression's or a statement's opening (a builtin format's name has neither)
_JINJA_MARK: Final = re.compile(r"\{(?:\{|%)")
# llama.cpp's regex_escape: the characters ECMAScript regular expressions give a meaning
_REGEX_SPECIAL: Final = re.compile(r"[.^$|()*+?\[\]{}\\]")


@dataclass(frozen=True)
class ToolCall:
    """A tool call of the reply: ``arguments`` is JSON text, as OpenAI gives it."""

    id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> Any:
        """``arguments`` decoded (ValueError when the model wrote invalid JSON)."""
        return json.loads(self.arguments)


@dataclass(frozen=True)
class ChatResult(GenerationResult):
    """A :class:`GenerationResult` (``text``: the raw generated text) and the reply parsed from
    it: ``content``, ``reasoning_content`` (the model's thinking, when the format separates it)
    and ``tool_calls``; ``renderer``: ``"chat-layer"`` or ``"builtin-template"`` (which rendered
    the prompt and parsed the reply; the builtin one parses nothing: ``content`` is ``text``)."""

    content: str = ""
    reasoning_content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    renderer: str = CHAT_LAYER
    format: str = ""  # the chat layer's name for the template's format


@dataclass(frozen=True)
class ToolCallDelta:
    """What a streamed step adds to tool call ``index``: its ``id`` and ``name`` (in the step
    that starts it, else empty) and more of its ``arguments``."""

    index: int
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatDelta:
    """What a streamed step adds to the reply (see :meth:`Context.stream_chat`): to the
    parsed ``content``, ``reasoning_content`` and ``tool_calls``; ``text``: the raw text it
    released (joined: the result's ``text``), with the log-probabilities of its tokens when
    asked for."""

    content: str = ""
    reasoning_content: str = ""
    tool_calls: tuple[ToolCallDelta, ...] = ()
    text: str = ""
    logprobs: tuple[TokenLogprob, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.content or self.reasoning_content or self.tool_calls or self.text)


@dataclass(frozen=True)
class ChatRequest:
    """A rendered chat request: the prompt and the plan's additions, and how to read the reply."""

    prompt: list[int] | MediaPrompt
    options: GenerateOptions
    preserved: frozenset[int]
    rendered: RenderedChat | None  # None: the builtin template rendered it

    def plan(self, plan: Plan) -> Plan:
        """The generation's plan with the chat's preserved tokens."""
        return replace(plan, preserved=self.preserved) if self.preserved else plan

    def message(self, text: str, *, partial: bool) -> dict[str, Any]:
        """``text`` (generated so far) as the assistant's message."""
        if self.rendered is None:
            return {"content": text, "reasoning_content": "", "tool_calls": []}
        return self.rendered.parse(text, partial=partial)

    def result(self, done: GenerationResult) -> ChatResult:
        """The generation's result with its reply parsed (LlamaChatParseError, carrying the
        unparsed result as ``.result``, when the format's parser refuses the text)."""
        try:
            message = self.message(done.text, partial=False)
        except LlamaChatParseError as exc:
            exc.result = done
            raise
        calls = tuple(
            ToolCall(str(c.get("id", "")), str(c["name"]), str(c["arguments"]))
            for c in message.get("tool_calls", [])
        )
        fields = {name: getattr(done, name) for name in done.__dataclass_fields__}
        return ChatResult(
            **fields,
            content=str(message.get("content") or ""),
            reasoning_content=str(message.get("reasoning_content") or ""),
            tool_calls=calls,
            renderer=BUILTIN_TEMPLATE if self.rendered is None else CHAT_LAYER,
            format=self.rendered.format if self.rendered is not None else "",
        )

    def close(self) -> None:
        if self.rendered is not None:
            self.rendered.close()


def split_options(options: ChatOptions) -> tuple[dict[str, Any], GenerateOptions]:
    """The chat's own options apart from the generation's."""
    chat = {k: v for k, v in options.items() if k in _CHAT_KEYS}
    rest = cast(GenerateOptions, {k: v for k, v in options.items() if k not in _CHAT_KEYS})
    if "media" in rest:
        raise TypeError("chat takes media as content parts of the messages, not media=")
    return chat, rest


def is_jinja(template: str) -> bool:
    """Whether ``template`` is a template text (Jinja) rather than a name llama.cpp knows."""
    return _JINJA_MARK.search(template) is not None


def render(
    model: Model, sidecar: Sidecar | None, messages: ChatMessages, options: ChatOptions
) -> ChatRequest:
    """``messages`` and ``options`` rendered for ``model`` (see the module's notes)."""
    chat, rest = split_options(options)
    template = chat.get("template")
    if template is not None and not isinstance(template, str):
        raise TypeError(f"template= is a Jinja text or a template name, not {type(template)}")
    if template is None and model.chat_template is None:
        raise ChatTemplateError(
            "the model has no chat template (its GGUF metadata has no tokenizer.chat_template)"
            ": pass template=, a Jinja text or a name such as 'chatml'"
        )
    asked = [name for name in LAYER_ONLY if options.get(name) is not None]
    marker = model.projector.marker if model.projector is not None else DEFAULT_MARKER
    if template is not None and not is_jinja(template):
        if asked:
            raise LlamaUnsupportedError(
                f"{', '.join(asked)}: llama.cpp's chat layer does this, and template= names a "
                f"builtin format ({template!r}) instead: give the template's Jinja text, or none "
                "for the model's own"
            )
        return _builtin(model, sidecar, messages, marker, template, rest)
    try:
        templates = model.chat_templates(template)
    except LlamaUnsupportedError as exc:
        if asked:
            raise LlamaUnsupportedError(
                f"{', '.join(asked)}: these need llama.cpp's chat layer, which these libraries "
                f"lack ({exc})"
            ) from None
        return _builtin(model, sidecar, messages, marker, template, rest)
    with templates:
        return _through_layer(model, sidecar, templates, messages, marker, chat, rest)


def _builtin(
    model: Model,
    sidecar: Sidecar | None,
    messages: ChatMessages,
    marker: str,
    template: str | None,
    rest: GenerateOptions,
) -> ChatRequest:
    flat, media = chat_media(messages, marker)
    text = model.apply_chat_template(flat, template=template)
    return ChatRequest(_tokens(model, sidecar, text, media), rest, frozenset(), None)


def _tokens(
    model: Model, sidecar: Sidecar | None, text: str, media: Sequence[MediaInput]
) -> list[int] | MediaPrompt:
    """The prompt's tokens, special tokens parsed (as llama.cpp's chat tools do)."""
    if not media:
        return model.tokenize(text, parse_special=True)
    return tokenize_media(model, sidecar, text, media, parse_special=True)


def _through_layer(
    model: Model,
    sidecar: Sidecar | None,
    templates: ChatTemplates,
    messages: ChatMessages,
    marker: str,
    chat: Mapping[str, Any],
    rest: GenerateOptions,
) -> ChatRequest:
    wire, media = layer_messages(messages, marker)
    request: dict[str, Any] = {"messages": wire, **layer_request(chat, rest)}
    if request.get("tools"):
        caps = templates.info()["caps"]
        if not (caps.get("supports_tools") or caps.get("supports_tool_calls")):
            raise LlamaUnsupportedError(
                "the chat template neither describes tools nor writes tool calls, so the model "
                "cannot be told about them (llama.cpp would drop them without a word): use a "
                "template that supports tools (template=)"
            )
    if rest.get("grammar") is not None and (request.get("tools") or "json_schema" in request):
        raise ValueError("grammar= is a grammar of your own: not with tools or a JSON schema")
    rest = cast(GenerateOptions, {k: v for k, v in rest.items() if k != "json_schema"})
    rendered = templates.apply(request)
    try:
        prompt = _tokens(model, sidecar, rendered.prompt, media)
        preserved = preserved_tokens(model, rendered.preserved_tokens)
        if rendered.grammar:
            tokens = prompt.tokens if not isinstance(prompt, list) else prompt
            rest["grammar"] = chat_grammar(model, rendered, preserved, tokens)
        stops = list(rendered.additional_stops)
        if stops:
            given = rest.get("stop")
            mine = [given] if isinstance(given, str) else list(given or ())
            rest["stop"] = [*mine, *[s for s in stops if s not in mine]]
    except BaseException:
        rendered.close()
        raise
    return ChatRequest(prompt, rest, preserved, rendered)


def layer_messages(
    messages: ChatMessages, marker: str
) -> tuple[list[dict[str, Any]], list[MediaInput]]:
    """Messages in OpenAI's shape for the chat layer (an image or audio part becomes a media
    marker part, the projector's marker in the prompt) and the media, in order."""
    wire: list[dict[str, Any]] = []
    media: list[MediaInput] = []
    for message in messages:
        if isinstance(message, ChatMessage):
            wire.append({"role": message.role, "content": message.content})
            continue
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise ValueError(f"a chat message is a mapping with a 'role', got {message!r}")
        item = dict(message)
        content = item.get("content")
        found = message_media(content, marker)
        if found is not None and found[1]:
            parts: list[dict[str, Any]] = []
            for part in cast(Sequence[Mapping[str, Any]], content):
                if part["type"] == "text":
                    parts.append({"type": "text", "text": str(part.get("text", ""))})
                else:
                    parts.append({"type": "media_marker", "text": marker})
            item["content"] = parts
            media += found[1]
        wire.append(item)
    return wire, media


def layer_request(chat: Mapping[str, Any], rest: GenerateOptions) -> dict[str, Any]:
    """The chat layer's request fields for the chat options (messages apart)."""
    request: dict[str, Any] = {}
    tools = chat.get("tools")
    choice = chat.get("tool_choice")
    if isinstance(choice, Mapping):
        name = _named_tool(choice)
        chosen = [t for t in tools or () if _tool_name(t) == name]
        if not chosen:
            raise ValueError(f"tool_choice names the tool {name!r}, which tools= does not have")
        tools, choice = chosen, "required"
    if tools is not None:
        if isinstance(tools, str | bytes) or not isinstance(tools, Sequence):
            raise TypeError("tools= is a sequence of OpenAI tool definitions")
        request["tools"] = [dict(t) for t in tools]
    if choice is not None:
        if not isinstance(choice, str):
            raise TypeError("tool_choice= is 'auto', 'none', 'required' or a named function")
        request["tool_choice"] = choice
    if chat.get("parallel_tool_calls") is not None:
        request["parallel_tool_calls"] = bool(chat["parallel_tool_calls"])
    schema = schema_of(chat.get("response_format"), rest.get("json_schema"))
    if schema is not None:
        request["json_schema"] = schema
    if chat.get("reasoning") is not None:
        request["enable_thinking"] = bool(chat["reasoning"])
    # llama.cpp's server separates reasoning by default (its --reasoning-format, deepseek in
    # every release of the MTP era); its chat layer alone leaves it in the content
    request["reasoning_format"] = str(chat.get("reasoning_format") or "deepseek")
    if chat.get("chat_template_kwargs") is not None:
        kwargs = chat["chat_template_kwargs"]
        if not isinstance(kwargs, Mapping):
            raise TypeError("chat_template_kwargs= is a mapping of template variables")
        request["chat_template_kwargs"] = dict(kwargs)
    return request


def _tool_name(tool: Mapping[str, Any]) -> object:
    function = tool.get("function")
    return function.get("name") if isinstance(function, Mapping) else None


def _named_tool(choice: Mapping[str, Any]) -> str:
    function = choice.get("function")
    name = function.get("name") if isinstance(function, Mapping) else None
    if choice.get("type") != "function" or not isinstance(name, str):
        shape = {"type": "function", "function": {"name": "..."}}
        raise ValueError(
            f"tool_choice as a mapping names one function ({shape}), got {dict(choice)!r}"
        )
    return name


def schema_of(response_format: object, json_schema: object) -> Any:
    """The JSON schema ``response_format`` (OpenAI's ``json_object`` or ``json_schema``; ``text``:
    none) or ``json_schema=`` asks for; None when neither does."""
    if response_format is None:
        return json_schema
    if json_schema is not None:
        raise ValueError("give response_format= or json_schema=, not both")
    if not isinstance(response_format, Mapping):
        raise TypeError("response_format= is a mapping with a 'type'")
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        schema = response_format.get("schema")  # llama.cpp's server takes one here too
        return schema if schema is not None else {"type": "object"}
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        if not isinstance(spec, Mapping) or not isinstance(spec.get("schema"), Mapping | bool):
            raise ValueError("response_format json_schema needs {'json_schema': {'schema': ...}}")
        return spec["schema"]
    raise ValueError(
        f"response_format type {kind!r} is not one of 'text', 'json_object', 'json_schema'"
    )


def preserved_tokens(model: Model, texts: Sequence[str]) -> frozenset[int]:
    """The chat format's preserved tokens that are single tokens of this vocabulary (as
    llama.cpp's sampler takes them): their text stays in the output for the parser."""
    found = set()
    for text in texts:
        ids = model.tokenize(text, add_special=False, parse_special=True)
        if len(ids) == 1:
            found.add(ids[0])
    return frozenset(found)


def chat_grammar(
    model: Model, rendered: RenderedChat, preserved: frozenset[int], prompt: Sequence[int]
) -> Grammar:
    """The rendered chat's grammar as llama.cpp's server samples with it: a trigger word that is
    one token becomes a token trigger (it must be a preserved token), another word an escaped
    pattern, a full pattern anchored; a grammar that is not lazy takes the generation prompt
    first (the tokens of the prompt that are its text)."""
    patterns: list[str] = []
    tokens: list[int] = []
    for trigger in rendered.grammar_triggers:
        if trigger.kind == "word":
            ids = model.tokenize(trigger.value, add_special=False, parse_special=True)
            if len(ids) == 1:
                if ids[0] not in preserved:
                    raise ValueError(
                        f"the chat format's trigger word {trigger.value!r} is one token but not "
                        "a preserved one"
                    )
                tokens.append(ids[0])
            else:
                patterns.append(_REGEX_SPECIAL.sub(lambda m: "\\" + m.group(0), trigger.value))
        elif trigger.kind == "pattern":
            patterns.append(trigger.value)
        elif trigger.kind == "pattern_full":
            value = trigger.value
            patterns.append(
                ("" if value.startswith("^") else "^")
                + value
                + ("" if value.endswith("$") else "$")
                if value
                else "^$"
            )
        elif trigger.kind == "token":
            tokens.append(trigger.token)
        else:
            raise ValueError(f"unknown grammar trigger type {trigger.kind!r}")
    prefill: tuple[int, ...] = ()
    if not rendered.grammar_lazy and rendered.generation_prompt:
        prefill = tuple(_prefill(model, prompt, rendered.generation_prompt))
    return Grammar(rendered.grammar, rendered.grammar_lazy, tuple(patterns), tuple(tokens), prefill)


def _prefill(model: Model, prompt: Sequence[int], generation_prompt: str) -> list[int]:
    """The prompt's last tokens, those whose text is the generation prompt: what the model saw.
    Where a token straddles its start, llama.cpp's own rule: the generation prompt tokenized
    alone, less a first token that is a space the tokenizer added."""
    want = generation_prompt.encode("utf-8")
    got = b""
    for k in range(1, min(len(prompt), len(want)) + 1):
        token = prompt[-k]
        if token < 0:  # a media item
            break
        got = model.token_bytes(token, special=True) + got
        if got == want:
            return list(prompt[-k:])
        if len(got) >= len(want):
            break
    ids = model.tokenize(generation_prompt, add_special=False, parse_special=True)
    if ids and not generation_prompt[0].isspace():
        first = model.token_bytes(ids[0], special=True).decode("utf-8", "replace")
        if first[:1].isspace():
            ids = ids[1:]
    return ids


class ChatStream:
    """A chat reply as it is generated (:meth:`Context.stream_chat`): iterate it for
    :class:`ChatDelta` s, what each step adds to the content, the reasoning and the tool calls
    (the reply parsed so far, as llama.cpp's server streams it); ``result`` (a
    :class:`ChatResult`) is set once it is exhausted. Closing it ends the generation."""

    def __init__(self, steps: Generator[str, None, GenerationResult], request: ChatRequest) -> None:
        self._steps = steps
        self._request = request
        self._text = ""
        self._seen: dict[str, Any] = {"content": "", "reasoning_content": "", "tool_calls": []}
        self._logprobs: list[TokenLogprob] = []
        self._piece = ""  # raw text released since the last delta
        self._done = False
        self.result: ChatResult | None = None

    def __iter__(self) -> Iterator[ChatDelta]:
        return self

    def __next__(self) -> ChatDelta:
        while not self._done:
            try:
                piece = next(self._steps)
            except StopIteration as stop:
                self._done = True
                try:
                    self.result = self._request.result(stop.value)
                finally:
                    self._request.close()
                delta = self._delta(self._as_message(self.result), partial=False)
            else:
                self._text += piece
                self._piece += piece
                if isinstance(piece, TextPiece):
                    self._logprobs += piece.logprobs
                delta = self._delta(self._request.message(self._text, partial=True), partial=True)
            if delta:
                return delta
        raise StopIteration

    @staticmethod
    def _as_message(result: ChatResult) -> dict[str, Any]:
        calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in result.tool_calls]
        return {
            "content": result.content,
            "reasoning_content": result.reasoning_content,
            "tool_calls": calls,
        }

    def _delta(self, message: Mapping[str, Any], *, partial: bool) -> ChatDelta:
        """What ``message`` adds to what was streamed (a field the parser rewrote rather than
        extended waits until it extends what was streamed again). While the reply is partial,
        whitespace at the end of a field is held back (the final parse may trim it); whitespace
        at its start is streamed as the partial parse gives it, so a format whose final parse
        trims it has it in the stream and not in the result."""
        added: dict[str, str] = {}
        for name in ("content", "reasoning_content"):
            now, before = str(message.get(name) or ""), self._seen[name]
            if partial:
                now = now.rstrip(_WHITESPACE)
            elif not now.startswith(before) and now.startswith(before.lstrip(_WHITESPACE)):
                before = before.lstrip(_WHITESPACE)  # trimmed at the start by the final parse
            added[name] = now[len(before) :] if now.startswith(before) else ""
            if added[name]:
                self._seen[name] = now
        calls: list[ToolCallDelta] = []
        seen_calls: list[dict[str, str]] = self._seen["tool_calls"]
        for index, call in enumerate(message.get("tool_calls") or []):
            name, args = str(call.get("name", "")), str(call.get("arguments", ""))
            if index >= len(seen_calls):
                if not name:
                    break  # a call is streamed once its name is known
                seen_calls.append({"arguments": args})
                calls.append(ToolCallDelta(index, str(call.get("id", "")), name, args))
                continue
            before = seen_calls[index]["arguments"]
            if args.startswith(before) and len(args) > len(before):
                seen_calls[index]["arguments"] = args
                calls.append(ToolCallDelta(index, "", "", args[len(before) :]))
        logprobs, self._logprobs = tuple(self._logprobs), []
        text, self._piece = self._piece, ""
        return ChatDelta(added["content"], added["reasoning_content"], tuple(calls), text, logprobs)

    def close(self) -> None:
        self._steps.close()
        self._request.close()

    def __enter__(self) -> ChatStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
