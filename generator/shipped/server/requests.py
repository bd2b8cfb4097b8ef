"""OpenAI request bodies checked and turned into :mod:`~llama_bindings.openai_format`'s options.

A field OpenAI's API does not have (nor llama.cpp's server's extensions taken here: ``min_p``,
``top_k``, ``typical_p``, ``repeat_penalty``, ``grammar``, ``reasoning``, ``reasoning_format``,
``chat_template_kwargs``) is refused, as OpenAI refuses it; ``user``, ``metadata``, ``store`` and
``service_tier`` are taken and ignored. Values of the wrong type or out of range are refused
here, naming the field, before a slot is asked for. Media come as data URIs only: a server never
reads a file or fetches a URL a client names."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

IGNORED: Final = frozenset({"user", "metadata", "store", "service_tier"})
_COMMON: Final = frozenset({
    "model", "stream", "stream_options", "max_tokens", "temperature", "top_p", "min_p", "top_k",
    "typical_p", "repeat_penalty", "frequency_penalty", "presence_penalty", "seed", "logit_bias",
    "stop", "grammar", "n",
})  # fmt: skip
CHAT_FIELDS: Final = _COMMON | {
    "messages", "max_completion_tokens", "logprobs", "top_logprobs", "tools", "tool_choice",
    "parallel_tool_calls", "response_format", "reasoning", "reasoning_format",
    "chat_template_kwargs",
}  # fmt: skip
COMPLETION_FIELDS: Final = _COMMON | {"prompt", "logprobs", "echo"}
_NUMBERS: Final = {
    "temperature": (0.0, 2.0), "top_p": (0.0, 1.0), "min_p": (0.0, 1.0), "typical_p": (0.0, 1.0),
    "repeat_penalty": (0.0, math.inf), "frequency_penalty": (-2.0, 2.0),
    "presence_penalty": (-2.0, 2.0),
}  # fmt: skip
_INTEGERS: Final = {"top_k": 0, "seed": 0, "max_tokens": 1, "top_logprobs": 0}


class BadRequest(ValueError):
    """A request refused before it reaches the runtime: ``status`` (400 or 404), ``param``
    (the field), ``code`` (OpenAI's, where it has one)."""

    def __init__(
        self, message: str, *, param: str | None = None, status: int = 400, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.param, self.status, self.code = param, status, code


@dataclass(frozen=True)
class Checked:
    """A request's input (``messages`` or ``prompt``), whether it streams, and the options for
    :func:`~llama_bindings.openai_format.create_chat_completion` / ``create_completion``."""

    input: Any
    stream: bool
    options: dict[str, Any]


def check_chat(body: Mapping[str, Any], model_id: str) -> Checked:
    """A ``/v1/chat/completions`` body."""
    options = _common(body, CHAT_FIELDS, model_id)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty array of messages", param="messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise BadRequest(f"messages[{i}] must be an object", param="messages")
        _check_media(message, i)
    if "max_completion_tokens" in options:
        given = options.pop("max_completion_tokens")
        options.setdefault("max_tokens", given)
        _integer("max_completion_tokens", given, 1)
    if "logprobs" in options and not isinstance(options["logprobs"], bool):
        raise BadRequest("logprobs must be true or false", param="logprobs")
    if "tools" in options and not isinstance(options["tools"], list):
        raise BadRequest("tools must be an array", param="tools")
    return Checked(messages, _stream(body), options)


def check_completion(body: Mapping[str, Any], model_id: str) -> Checked:
    """A ``/v1/completions`` body: one prompt, text or token ids."""
    options = _common(body, COMPLETION_FIELDS, model_id)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, list):
        if not prompt or not _token_ids(prompt):
            raise BadRequest(
                "prompt must be a string or an array of token ids (one prompt per request)",
                param="prompt",
            )
    elif not isinstance(prompt, str) or not prompt:
        raise BadRequest("prompt must be a non-empty string or token ids", param="prompt")
    if "logprobs" in options:
        _integer("logprobs", options["logprobs"], 0)
    return Checked(prompt, _stream(body), options)


def check_embeddings(body: Mapping[str, Any], model_id: str) -> tuple[list[Any], str]:
    """A ``/v1/embeddings`` body: its inputs (texts, or token-id lists) and encoding."""
    _fields(body, {"input", "model", "encoding_format", "dimensions"}, model_id)
    given = body.get("input")
    inputs: list[Any] = given if isinstance(given, list) else [given] if given else []
    if inputs and _token_ids(inputs):
        inputs = [inputs]
    ok = inputs and all(
        (isinstance(i, str) and i) or (isinstance(i, list) and i and _token_ids(i)) for i in inputs
    )
    if not ok:
        raise BadRequest(
            "input must be a non-empty string, an array of them, or token ids", param="input"
        )
    encoding = body.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise BadRequest("encoding_format must be 'float' or 'base64'", param="encoding_format")
    if body.get("dimensions") is not None:
        raise BadRequest("dimensions: this model's embeddings have one size", param="dimensions")
    return inputs, encoding


def _token_ids(items: list[Any]) -> bool:
    return all(isinstance(t, int) and not isinstance(t, bool) for t in items)


def _fields(body: Mapping[str, Any], allowed: frozenset[str] | set[str], model_id: str) -> None:
    unknown = sorted(set(body) - allowed - IGNORED)
    if unknown:
        raise BadRequest(
            f"Unrecognized request argument supplied: {', '.join(unknown)}", param=unknown[0]
        )
    model = body.get("model")
    if model is not None and model != model_id:
        raise BadRequest(
            f"The model {model!r} does not exist: this server serves {model_id!r}",
            param="model", status=404, code="model_not_found",
        )  # fmt: skip


def _common(body: Mapping[str, Any], allowed: frozenset[str], model_id: str) -> dict[str, Any]:
    _fields(body, allowed, model_id)
    options = {k: v for k, v in body.items() if k not in IGNORED and v is not None}
    for name in ("messages", "prompt", "stream", "n"):
        options.pop(name, None)
    n = body.get("n")
    if n is not None and n != 1:
        raise BadRequest("n: one choice per request", param="n")
    for name, (low, high) in _NUMBERS.items():
        if name in options:
            value = options[name]
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise BadRequest(f"{name} must be a number", param=name)
            if not low <= value <= high:
                raise BadRequest(f"{name} must be in [{low}, {high}], got {value}", param=name)
    for name, low in _INTEGERS.items():
        if name in options:
            _integer(name, options[name], low)
    stop = options.get("stop")
    if stop is not None and not (
        isinstance(stop, str) or (isinstance(stop, list) and all(isinstance(s, str) for s in stop))
    ):
        raise BadRequest("stop must be a string or an array of strings", param="stop")
    bias = options.get("logit_bias")
    if bias is not None and not isinstance(bias, dict):
        raise BadRequest("logit_bias must be an object of token ids to biases", param="logit_bias")
    if "stream_options" in options and not isinstance(options["stream_options"], dict):
        raise BadRequest("stream_options must be an object", param="stream_options")
    options["model"] = model_id
    return options


def _integer(name: str, value: object, low: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadRequest(f"{name} must be an integer", param=name)
    if value < low:
        raise BadRequest(f"{name} must be >= {low}, got {value}", param=name)


def _stream(body: Mapping[str, Any]) -> bool:
    stream = body.get("stream", False)
    if stream is None:
        return False
    if not isinstance(stream, bool):
        raise BadRequest("stream must be true or false", param="stream")
    return stream


def _check_media(message: Mapping[str, Any], index: int) -> None:
    """Images as data URIs only (a path or a ``file:`` URL would read the server's files)."""
    content = message.get("content")
    if not isinstance(content, list):
        return
    for part in content:
        if isinstance(part, dict) and part.get("type") == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str) or not url.startswith("data:"):
                raise BadRequest(
                    f"messages[{index}]: images must be data URIs (data:image/png;base64,...): "
                    "this server reads no file and fetches no URL",
                    param="messages",
                )
