"""OpenAI-style completion and chat responses over the runtime, in the shapes llama-cpp-python's
``Llama.create_completion`` and ``Llama.create_chat_completion`` return, so code written for
those dicts runs unchanged::

    from llama_bindings.openai_format import create_chat_completion, create_completion
    from llama_bindings.runtime import Context, Model

    with Model("model.gguf") as model, Context(model) as ctx:
        out = create_completion(ctx, "Q: Name a planet. A:", max_tokens=32, stop=["\\n"])
        print(out["choices"][0]["text"], out["usage"]["total_tokens"])
        messages = [{"role": "user", "content": "Hi"}]
        for chunk in create_chat_completion(ctx, messages, stream=True):
            print(chunk["choices"][0]["delta"].get("content", ""), end="")

Pure Python over the public runtime API (:meth:`Context.generate` / ``stream`` / ``chat`` /
``stream_chat``); each function takes a :class:`Context` or its :class:`Slots` (what the server,
:mod:`llama_bindings.server`, runs them on). Choices:

* Finish reasons (:func:`finish_reason`): an end-of-generation token, a stop sequence and a
  :class:`Cancellation` give ``"stop"`` (a cancellation ends the generation on the caller's
  request, as a llama-cpp-python ``stopping_criteria`` does, which reports ``"stop"``);
  ``max_tokens`` and a full context give ``"length"``.
* Defaults are llama-cpp-python's: completions ``max_tokens`` 16, ``temperature`` 0.8; chat
  ``max_tokens`` None (until the context is full), ``temperature`` 0.2; both ``top_p`` 0.95,
  ``min_p`` 0.05, ``top_k`` 40, ``typical_p`` 1, ``repeat_penalty`` 1 (``temperature`` 0:
  greedy). They make a :class:`Sampling`; ``seed`` None draws a random seed.
* ``model``: the name reported in ``"model"`` (the runtime's ``Model`` keeps no path); default
  the GGUF's ``general.name``, else its ``general.architecture``, else ``"llama.cpp"``.
* ``usage`` counts are the generation's metrics (``prompt_tokens``, ``generated_tokens``: every
  generated token, those of a stop sequence too, never the end-of-generation token). Streamed
  chunks carry no ``usage``, as llama-cpp-python's; ``stream_options={"include_usage": True}``
  (OpenAI's option) adds one last chunk with empty ``choices`` and the ``usage``. The chunk
  that ends a completion stream has ``"text": ""`` and the finish reason; a chat stream starts
  with ``{"role": "assistant"}`` and ends with ``{}`` and the finish reason.
* Log-probabilities (completions ``logprobs=k``; chat ``logprobs=True, top_logprobs=k``): those
  of the model's distribution (see :mod:`~llama_bindings.outputs`). A token's text is the text it
  adds to the completion, UTF-8 decoded across tokens (a character split over tokens belongs to
  the token that completes it; the others have ``""``), so the ``tokens`` join to the text and
  ``text_offset`` counts characters from the start of the prompt's text. Alternatives are named
  by their own bytes (U+FFFD for a partial character), the chosen token is always in a
  completion's ``top_logprobs`` (as llama-cpp-python and OpenAI do), and chat entries carry the
  token's UTF-8 ``bytes``. Tokens of a stop sequence past the returned text are left out.
  ``echo`` with log-probabilities is refused (the runtime has none for prompt tokens).
* Chat runs :meth:`Context.chat`: llama.cpp's own chat layer renders the model's template and
  parses the reply, as llama.cpp's server of the same release does (``template=`` a name such
  as ``"chatml"``: the builtin renderer, which parses nothing). ``tools``, ``tool_choice``,
  ``parallel_tool_calls`` and ``response_format`` are OpenAI's; the message carries
  ``tool_calls`` (``content`` None when the model only called tools; finish reason
  ``"tool_calls"``; a call the model wrote without an id gets one, ``call_...``, as llama.cpp's
  server gives it) and ``reasoning_content`` (llama.cpp's server's field for the model's
  thinking); a stream's deltas carry the same, tool-call arguments in pieces after a first
  delta with the call's ``id`` and name. ``reasoning`` (the template's thinking switch),
  ``reasoning_format`` and ``chat_template_kwargs`` are llama.cpp's server's extensions.
  Messages are OpenAI's (image and audio parts for the model's projector, an assistant's
  ``tool_calls``, tool replies).
"""

from __future__ import annotations

import codecs
import time
import uuid
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, NotRequired, TypedDict, Unpack, overload

from .errors import LlamaUnsupportedError
from .outputs import TokenLogprob
from .runtime import (
    Cancellation,
    ChatDelta,
    ChatMessage,
    ChatMessages,
    ChatOptions,
    ChatResult,
    ChatStream,
    Context,
    FinishReason,
    GenerateOptions,
    GenerationResult,
    Model,
    Sampling,
    Slots,
    Stream,
    ToolCall,
)

__all__ = [
    "ChatCompletion",
    "ChatCompletionChunk",
    "ChatCompletionOptions",
    "Completion",
    "CompletionChunk",
    "CompletionOptions",
    "create_chat_completion",
    "create_completion",
    "finish_reason",
    "model_name",
]

FinishReasonName = Literal["stop", "length", "tool_calls"]
Target = Context | Slots  # what generates: a context, or its slots


class CompletionLogprobs(TypedDict):
    tokens: list[str]
    text_offset: list[int]
    token_logprobs: list[float | None]
    top_logprobs: list[dict[str, float] | None]


class CompletionChoice(TypedDict):
    text: str
    index: int
    logprobs: CompletionLogprobs | None
    finish_reason: FinishReasonName | None


class CompletionUsage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class Completion(TypedDict):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: CompletionUsage


class CompletionChunk(TypedDict):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: NotRequired[CompletionUsage]  # only in the include_usage chunk


class ChatTopLogprob(TypedDict):
    token: str
    logprob: float
    bytes: list[int] | None


class ChatTokenLogprob(ChatTopLogprob):
    top_logprobs: list[ChatTopLogprob]


class ChatLogprobs(TypedDict):
    content: list[ChatTokenLogprob] | None
    refusal: list[ChatTokenLogprob] | None


class ChatCompletionFunction(TypedDict):
    name: str
    arguments: str  # JSON text


class ChatCompletionToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: ChatCompletionFunction


class ChatCompletionMessage(TypedDict):
    role: Literal["assistant"]
    content: str | None
    tool_calls: NotRequired[list[ChatCompletionToolCall]]
    reasoning_content: NotRequired[str]  # llama.cpp's server's name for the model's thinking


class ChatCompletionChoice(TypedDict):
    index: int
    message: ChatCompletionMessage
    logprobs: ChatLogprobs | None
    finish_reason: FinishReasonName | None


class ChatCompletion(TypedDict):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatCompletionChoice]
    usage: CompletionUsage


class ChatCompletionFunctionDelta(TypedDict, total=False):
    name: str
    arguments: str


class ChatCompletionToolCallDelta(TypedDict, total=False):
    index: int
    id: str
    type: Literal["function"]
    function: ChatCompletionFunctionDelta


class ChatCompletionDelta(TypedDict, total=False):
    role: Literal["assistant"]
    content: str
    reasoning_content: str
    tool_calls: list[ChatCompletionToolCallDelta]


class ChatCompletionChunkChoice(TypedDict):
    index: int
    delta: ChatCompletionDelta
    logprobs: ChatLogprobs | None
    finish_reason: FinishReasonName | None


class ChatCompletionChunk(TypedDict):
    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChatCompletionChunkChoice]
    usage: NotRequired[CompletionUsage]  # only in the include_usage chunk


class _CommonOptions(TypedDict, total=False):
    max_tokens: int | None  # None or <= 0: until the context is full
    temperature: float
    top_p: float
    min_p: float
    typical_p: float
    top_k: int
    repeat_penalty: float
    frequency_penalty: float
    presence_penalty: float
    seed: int | None
    logit_bias: Mapping[int, float] | Mapping[str, float] | None  # token id (or its decimal text)
    stop: str | Sequence[str] | None
    grammar: str | None  # GBNF, root rule ``root``
    model: str | None
    cancel: Cancellation | None
    stream_options: Mapping[str, bool] | None  # {"include_usage": True}


class CompletionOptions(_CommonOptions, total=False):
    """Keyword arguments of :func:`create_completion` (besides ``stream``)."""

    logprobs: int | None  # alternatives per token (>= 0); None: no log-probabilities
    echo: bool  # the prompt's text before the completion's


class ChatCompletionOptions(_CommonOptions, total=False):
    """Keyword arguments of :func:`create_chat_completion` (besides ``stream``)."""

    template: str | None  # see Context.chat; default the GGUF's
    logprobs: bool | None
    top_logprobs: int | None  # alternatives per token; with logprobs=True
    tools: Sequence[Mapping[str, Any]] | None  # OpenAI function definitions
    tool_choice: str | Mapping[str, Any] | None  # auto, none, required or a named function
    parallel_tool_calls: bool | None
    response_format: Mapping[str, Any] | None  # json_object, json_schema or text
    reasoning: bool | None  # the template's thinking switch (enable_thinking)
    reasoning_format: str | None  # llama.cpp's (default deepseek: thinking apart)
    chat_template_kwargs: Mapping[str, Any] | None


_SAMPLING_DEFAULTS: Final[dict[str, Any]] = {
    "temperature": 0.8, "top_p": 0.95, "min_p": 0.05, "typical_p": 1.0, "top_k": 40,
    "repeat_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0, "seed": None,
}  # fmt: skip
_COMPLETION_DEFAULTS: Final[dict[str, Any]] = {**_SAMPLING_DEFAULTS, "max_tokens": 16}
_CHAT_DEFAULTS: Final[dict[str, Any]] = {
    **_SAMPLING_DEFAULTS, "temperature": 0.2, "max_tokens": None,
}  # fmt: skip
_FINISH: Final[dict[FinishReason, FinishReasonName]] = {
    FinishReason.END_OF_GENERATION: "stop",
    FinishReason.STOP: "stop",
    FinishReason.CANCELLED: "stop",
    FinishReason.LENGTH: "length",
    FinishReason.CONTEXT_FULL: "length",
}


def finish_reason(reason: FinishReason) -> FinishReasonName:
    """The OpenAI finish reason of a runtime :class:`FinishReason` (see the module's notes)."""
    return _FINISH[FinishReason(reason)]


def model_name(model: Model) -> str:
    """The default ``"model"`` of a response: the GGUF's ``general.name``, else its
    ``general.architecture``, else ``"llama.cpp"``."""
    for key in ("general.name", "general.architecture"):
        value = model.metadata_value(key)
        if value:
            return value
    return "llama.cpp"


def _usage(result: GenerationResult) -> CompletionUsage:
    prompt, generated = result.metrics.prompt_tokens, result.metrics.generated_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": generated,
        "total_tokens": prompt + generated,
    }


@dataclass(frozen=True)
class _Request:
    """A checked request: the response's identity and the runtime's generation options."""

    id: str
    created: int
    model: str
    generate: dict[str, Any]  # keyword arguments of Context.generate / stream / chat
    include_usage: bool


def _request(
    ctx: Target, prefix: str, options: Mapping[str, Any], defaults: Mapping[str, Any]
) -> _Request:
    merged = {**defaults, **options}
    sampling = Sampling(
        **{name: merged[name] for name in _SAMPLING_DEFAULTS},
        logit_bias={int(token): bias for token, bias in (merged.get("logit_bias") or {}).items()},
    )
    max_tokens = merged["max_tokens"]
    if max_tokens is None or max_tokens <= 0:
        max_tokens = ctx.n_ctx  # the context fills first: finish "length"
    generate: dict[str, Any] = {"max_tokens": max_tokens, "sampling": sampling}
    for name in ("stop", "grammar", "cancel"):
        if merged.get(name) is not None:
            generate[name] = merged[name]
    stream_options = merged.get("stream_options") or {}
    unknown = sorted(set(stream_options) - {"include_usage"})
    if unknown:
        raise TypeError(f"unexpected stream_options key(s): {', '.join(unknown)}")
    given = merged.get("model")
    return _Request(
        id=f"{prefix}-{uuid.uuid4()}",
        created=int(time.time()),
        model=str(given) if given is not None else model_name(ctx.model),
        generate=generate,
        include_usage=bool(stream_options.get("include_usage", False)),
    )


def _check_names(options: Mapping[str, Any], allowed: type, what: str) -> None:
    unknown = sorted(set(options) - set(allowed.__annotations__))
    if unknown:
        raise TypeError(f"{what}() got unexpected keyword argument(s): {', '.join(unknown)}")


@dataclass(frozen=True)
class _Entry:
    """One generated token with its text (what it adds to the completion) and log-probabilities."""

    token: int
    text: str
    offset: int  # characters from the start of the completion
    logprob: float
    top: tuple[tuple[int, float], ...]


class _TokenTexts:
    """Texts and offsets of generated tokens, in order, across the pieces of one generation."""

    def __init__(self, model: Model) -> None:
        self._model = model
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._offset = 0

    def entries(self, items: Sequence[TokenLogprob], end: int) -> list[_Entry]:
        """The entries of ``items`` within the completion's first ``end`` characters: a token
        whose text starts at ``end`` or later is past a stop sequence's cut, and left out with
        the ones after it."""
        found: list[_Entry] = []
        for item in items:
            text = self._decoder.decode(self._model.token_bytes(item.token))
            if text and self._offset >= end:
                break
            found.append(_Entry(item.token, text, self._offset, item.logprob, tuple(item.top)))
            self._offset += len(text)
        if found and self._offset < end:  # the generation's end: a partial character's U+FFFD
            tail = self._decoder.decode(b"", final=True)
            last = found[-1]
            found[-1] = _Entry(last.token, last.text + tail, last.offset, last.logprob, last.top)
            self._offset += len(tail)
        return found

    def alternative(self, token: int) -> str:
        """An alternative's text: its own bytes (U+FFFD for a partial character)."""
        return self.bytes(token).decode("utf-8", errors="replace")

    def bytes(self, token: int) -> bytes:
        return self._model.token_bytes(token)

    def completion(self, entries: Sequence[_Entry], base: int) -> CompletionLogprobs:
        """llama-cpp-python's completion shape; ``base``: characters before the completion."""
        top_logprobs: list[dict[str, float] | None] = []
        for entry in entries:
            top: dict[str, float] = {}
            for token, logprob in entry.top:
                top.setdefault(self.alternative(token), logprob)
            top[entry.text] = entry.logprob  # the chosen token is always there
            top_logprobs.append(top)
        return {
            "tokens": [entry.text for entry in entries],
            "text_offset": [base + entry.offset for entry in entries],
            "token_logprobs": [entry.logprob for entry in entries],
            "top_logprobs": top_logprobs,
        }

    def chat(self, entries: Sequence[_Entry]) -> ChatLogprobs:
        """OpenAI's chat shape (llama-cpp-python's keys), with each token's UTF-8 bytes."""
        content: list[ChatTokenLogprob] = [
            {
                "token": entry.text,
                "logprob": entry.logprob,
                "bytes": list(self.bytes(entry.token)),
                "top_logprobs": [
                    {"token": self.alternative(t), "logprob": lp, "bytes": list(self.bytes(t))}
                    for t, lp in entry.top
                ],
            }
            for entry in entries
        ]
        return {"content": content, "refusal": None}


def _piece_logprobs(piece: str) -> Sequence[TokenLogprob]:
    """The log-probabilities a streamed piece carries (a TextPiece's; none for a plain str)."""
    return tuple(getattr(piece, "logprobs", ()))


def _text_of(ctx: Target, prompt: str | Sequence[int]) -> str:
    return prompt if isinstance(prompt, str) else ctx.model.detokenize(prompt)


def _reason(result: GenerationResult | None) -> FinishReasonName | None:
    return None if result is None else finish_reason(result.finish_reason)


def _choice(
    text: str, logprobs: CompletionLogprobs | None, result: GenerationResult | None = None
) -> CompletionChoice:
    return {"text": text, "index": 0, "logprobs": logprobs, "finish_reason": _reason(result)}


def _completion(
    ctx: Target,
    prompt: str | Sequence[int],
    request: _Request,
    top: int | None,
    echo: bool,
) -> Completion:
    options = dict(request.generate) if top is None else {**request.generate, "logprobs": top}
    result = ctx.generate(prompt, **options)
    prompt_text = _text_of(ctx, prompt) if echo or top is not None else ""
    logprobs = None
    if top is not None:
        texts = _TokenTexts(ctx.model)
        entries = texts.entries(result.logprobs or (), len(result.text))
        logprobs = texts.completion(entries, len(prompt_text))
    text = prompt_text + result.text if echo else result.text
    return {
        "id": request.id,
        "object": "text_completion",
        "created": request.created,
        "model": request.model,
        "choices": [_choice(text, logprobs, result)],
        "usage": _usage(result),
    }


def _completion_chunk(request: _Request, choices: list[CompletionChoice]) -> CompletionChunk:
    return {
        "id": request.id,
        "object": "text_completion",
        "created": request.created,
        "model": request.model,
        "choices": choices,
    }


def _completion_chunks(
    ctx: Target,
    stream: Stream,
    request: _Request,
    top: int | None,
    prompt: str,
    echo: bool,
) -> Generator[CompletionChunk, None, None]:
    """The chunks of a completion stream (``prompt``: the prompt's text)."""
    texts = _TokenTexts(ctx.model) if top is not None else None
    with stream:
        if echo and prompt:
            yield _completion_chunk(request, [_choice(prompt, None)])
        released = 0
        for piece in stream:
            released += len(piece)
            logprobs = None
            if texts is not None:
                entries = texts.entries(_piece_logprobs(piece), released)
                logprobs = texts.completion(entries, len(prompt))
            yield _completion_chunk(request, [_choice(str(piece), logprobs)])
    result = stream.result
    if result is None:  # pragma: no cover - an exhausted stream always has its result
        return
    yield _completion_chunk(request, [_choice("", None, result)])
    if request.include_usage:
        yield {**_completion_chunk(request, []), "usage": _usage(result)}


@overload
def create_completion(
    ctx: Target,
    prompt: str | Sequence[int],
    *,
    stream: Literal[False] = False,
    **options: Unpack[CompletionOptions],
) -> Completion: ...
@overload
def create_completion(
    ctx: Target,
    prompt: str | Sequence[int],
    *,
    stream: Literal[True],
    **options: Unpack[CompletionOptions],
) -> Iterator[CompletionChunk]: ...
@overload
def create_completion(
    ctx: Target,
    prompt: str | Sequence[int],
    *,
    stream: bool,
    **options: Unpack[CompletionOptions],
) -> Completion | Iterator[CompletionChunk]: ...
def create_completion(
    ctx: Target,
    prompt: str | Sequence[int],
    *,
    stream: bool = False,
    **options: Unpack[CompletionOptions],
) -> Completion | Iterator[CompletionChunk]:
    """A text completion of ``prompt`` (text or token ids) on ``ctx``, as llama-cpp-python's
    ``Llama.create_completion`` returns it: a ``"text_completion"`` dict, or with ``stream`` an
    iterator of chunks (one per streamed piece, then one with ``"text": ""`` and the finish
    reason). Options: :class:`CompletionOptions` (defaults in the module's notes); they are
    checked here, before anything generates; a stream generates as it is read, and closing it
    (or dropping it) ends the generation."""
    _check_names(options, CompletionOptions, "create_completion")
    top = options.get("logprobs")
    echo = bool(options.get("echo", False))
    if echo and top is not None:
        raise LlamaUnsupportedError(
            "echo with logprobs: the runtime has no log-probabilities for prompt tokens"
        )
    request = _request(ctx, "cmpl", options, _COMPLETION_DEFAULTS)
    if not stream:
        return _completion(ctx, prompt, request, top, echo)
    generate = request.generate if top is None else {**request.generate, "logprobs": top}
    pieces = ctx.stream(prompt, **generate)
    return _completion_chunks(ctx, pieces, request, top, _text_of(ctx, prompt), echo)


def _chat_top(options: ChatCompletionOptions) -> int | None:
    """The runtime's ``logprobs=``: ``top_logprobs`` (0 when not given) if ``logprobs``."""
    top = options.get("top_logprobs")
    if not options.get("logprobs"):
        if top is not None:
            raise ValueError("top_logprobs needs logprobs=True")
        return None
    return 0 if top is None else top


def _chat_options(request: _Request, options: ChatCompletionOptions) -> dict[str, Any]:
    generate = dict(request.generate)
    top = _chat_top(options)
    if top is not None:
        generate["logprobs"] = top
    for name in _CHAT_ONLY:
        if options.get(name) is not None:
            generate[name] = options.get(name)
    return generate


# the options Context.chat takes beyond Context.generate's, passed on as they are
_CHAT_ONLY: Final = tuple(
    sorted(set(ChatOptions.__annotations__) - set(GenerateOptions.__annotations__))
)


def _call_id(given: str) -> str:
    """A tool call's id: the model's, else a new one (as llama.cpp's server gives one), which a
    client's tool reply names in ``tool_call_id``."""
    return given or f"call_{uuid.uuid4().hex[:24]}"


def _tool_calls(calls: Sequence[ToolCall]) -> list[ChatCompletionToolCall]:
    return [
        {
            "id": _call_id(c.id),
            "type": "function",
            "function": {"name": c.name, "arguments": c.arguments},
        }
        for c in calls
    ]


def _message(result: ChatResult) -> ChatCompletionMessage:
    """The reply as OpenAI's message: ``content`` None when the model only called tools."""
    message: ChatCompletionMessage = {
        "role": "assistant",
        "content": result.content if result.content or not result.tool_calls else None,
    }
    if result.tool_calls:
        message["tool_calls"] = _tool_calls(result.tool_calls)
    if result.reasoning_content:
        message["reasoning_content"] = result.reasoning_content
    return message


def _chat_reason(result: ChatResult | None) -> FinishReasonName | None:
    """``"tool_calls"`` when the reply calls tools and ended by itself (as OpenAI's)."""
    if result is not None and result.tool_calls and finish_reason(result.finish_reason) == "stop":
        return "tool_calls"
    return _reason(result)


def _delta(delta: ChatDelta, ids: dict[int, str]) -> ChatCompletionDelta:
    """``delta`` as OpenAI's (``ids``: the ids given to the stream's calls so far, by index)."""
    out: ChatCompletionDelta = {}
    if delta.content:
        out["content"] = delta.content
    if delta.reasoning_content:
        out["reasoning_content"] = delta.reasoning_content
    calls: list[ChatCompletionToolCallDelta] = []
    for call in delta.tool_calls:
        item: ChatCompletionToolCallDelta = {"index": call.index}
        function: ChatCompletionFunctionDelta = {"arguments": call.arguments}
        if call.name:
            ids[call.index] = _call_id(call.id)
            item |= {"id": ids[call.index], "type": "function"}
            function["name"] = call.name
        item["function"] = function
        calls.append(item)
    if calls:
        out["tool_calls"] = calls
    return out


def _chat_completion(
    ctx: Target, messages: ChatMessages, request: _Request, generate: dict[str, Any]
) -> ChatCompletion:
    result = ctx.chat(messages, **generate)
    logprobs = None
    if "logprobs" in generate:
        texts = _TokenTexts(ctx.model)
        logprobs = texts.chat(texts.entries(result.logprobs or (), len(result.text)))
    return {
        "id": request.id,
        "object": "chat.completion",
        "created": request.created,
        "model": request.model,
        "choices": [
            {
                "index": 0,
                "message": _message(result),
                "logprobs": logprobs,
                "finish_reason": _chat_reason(result),
            }
        ],
        "usage": _usage(result),
    }


def _chat_chunk(
    request: _Request,
    delta: ChatCompletionDelta,
    logprobs: ChatLogprobs | None = None,
    result: ChatResult | None = None,
) -> ChatCompletionChunk:
    return {
        "id": request.id,
        "object": "chat.completion.chunk",
        "created": request.created,
        "model": request.model,
        "choices": [
            {
                "index": 0,
                "delta": delta,
                "logprobs": logprobs,
                "finish_reason": _chat_reason(result),
            }
        ],
    }


def _chat_chunks(
    ctx: Target, stream: ChatStream, request: _Request, logprobs: bool
) -> Generator[ChatCompletionChunk, None, None]:
    texts = _TokenTexts(ctx.model) if logprobs else None
    with stream:
        yield _chat_chunk(request, {"role": "assistant"})
        released = 0
        ids: dict[int, str] = {}
        for delta in stream:
            released += len(delta.text)
            found = None
            if texts is not None and delta.logprobs:
                found = texts.chat(texts.entries(delta.logprobs, released))
            out = _delta(delta, ids)
            if out or found is not None:
                yield _chat_chunk(request, out, found)
    result = stream.result
    if result is None:  # pragma: no cover - an exhausted stream always has its result
        return
    yield _chat_chunk(request, {}, None, result)
    if request.include_usage:
        yield {**_chat_chunk(request, {}), "choices": [], "usage": _usage(result)}


@overload
def create_chat_completion(
    ctx: Target,
    messages: Sequence[ChatMessage | Mapping[str, Any]],
    *,
    stream: Literal[False] = False,
    **options: Unpack[ChatCompletionOptions],
) -> ChatCompletion: ...
@overload
def create_chat_completion(
    ctx: Target,
    messages: Sequence[ChatMessage | Mapping[str, Any]],
    *,
    stream: Literal[True],
    **options: Unpack[ChatCompletionOptions],
) -> Iterator[ChatCompletionChunk]: ...
@overload
def create_chat_completion(
    ctx: Target,
    messages: Sequence[ChatMessage | Mapping[str, Any]],
    *,
    stream: bool,
    **options: Unpack[ChatCompletionOptions],
) -> ChatCompletion | Iterator[ChatCompletionChunk]: ...
def create_chat_completion(
    ctx: Target,
    messages: Sequence[ChatMessage | Mapping[str, Any]],
    *,
    stream: bool = False,
    **options: Unpack[ChatCompletionOptions],
) -> ChatCompletion | Iterator[ChatCompletionChunk]:
    """The assistant's reply to ``messages`` (OpenAI's mappings or :class:`ChatMessage`) by
    :meth:`Context.chat` (the model's template through llama.cpp's chat layer; ``template=``
    another), as llama-cpp-python's ``Llama.create_chat_completion`` returns it: a
    ``"chat.completion"`` dict, or with ``stream`` an iterator of ``"chat.completion.chunk"``
    dicts (the role, one per step that adds to the reply, then ``{}`` with the finish reason).
    Options: :class:`ChatCompletionOptions`, checked here as in :func:`create_completion`."""
    _check_names(options, ChatCompletionOptions, "create_chat_completion")
    request = _request(ctx, "chatcmpl", options, _CHAT_DEFAULTS)
    generate = _chat_options(request, options)
    if not stream:  # the messages are checked by Context.chat
        return _chat_completion(ctx, messages, request, generate)
    pieces = ctx.stream_chat(messages, **generate)
    return _chat_chunks(ctx, pieces, request, "logprobs" in generate)
