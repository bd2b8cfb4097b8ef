"""llama.cpp's own chat layer through the wrapper (``llama_mtp_chat_*`` in ``llama_mtp.h``): the
model's Jinja template run by llama.cpp's engine, tools, reasoning and JSON schemas, rendered and
parsed exactly as llama.cpp's server of the same release does.

:class:`ChatTemplates` holds a model's templates (or a template text); :meth:`ChatTemplates.apply`
renders an OpenAI-style request into a :class:`RenderedChat`: the prompt, the grammar and its lazy
triggers, the extra stop strings, and what :meth:`RenderedChat.parse` needs to turn generated text
back into content, reasoning and tool calls. :func:`json_schema_to_grammar` is llama.cpp's own
schema-to-GBNF conversion.

Errors: a template that does not parse or raises, :class:`ChatTemplateError`; a schema llama.cpp
cannot turn into a grammar, :class:`~llama_bindings.errors.LlamaSchemaError`; generated text the
format's parser refuses, :class:`~llama_bindings.errors.LlamaChatParseError`; a malformed request,
:class:`ValueError`; a release or wrapper without the chat layer, LlamaUnsupportedError.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import constants
from .._ffi import SYMBOL_ERRORS
from ..errors import (
    LlamaChatParseError,
    LlamaRuntimeError,
    LlamaSchemaError,
    LlamaUnsupportedError,
)
from ..lifetimes import NativeObject
from .results import LLAMA_CPP_TAG, ChatTemplateError

if TYPE_CHECKING:
    from ..loader import Libraries

# The wrapper's statuses (by enumerator suffix) and the errors they raise. Read when a call
# fails: bindings of a release without the wrapper have no LLAMA_MTP_STATUS_* constants.
_ERRORS: dict[str, type[Exception]] = {
    "INVALID_ARGUMENT": ValueError,
    "TEMPLATE_ERROR": ChatTemplateError,
    "SCHEMA_ERROR": LlamaSchemaError,
    "PARSE_ERROR": LlamaChatParseError,
}


def _status(suffix: str) -> int | None:
    value: int | None = getattr(constants, f"LLAMA_MTP_STATUS_{suffix}", None)
    return value


def _error_type(status: int) -> type[Exception]:
    for suffix, error in _ERRORS.items():
        if status == _status(suffix):
            return error
    return LlamaRuntimeError


def _wrapper(libs: Libraries) -> Any:
    """The wrapper library with the chat layer, or LlamaUnsupportedError saying why not."""
    library: Any = libs.llama_mtp
    if library is None:
        raise LlamaUnsupportedError(
            f"the libraries have no llama_mtp wrapper (llama.cpp {LLAMA_CPP_TAG}): llama.cpp's "
            "chat layer is reached through it"
        )
    try:
        supported = library.llama_mtp_chat_supported
    except SYMBOL_ERRORS:
        raise LlamaUnsupportedError(
            "this llama_mtp wrapper has no chat layer (built before llama-bindgen added it)"
        ) from None
    if supported() != _status("OK"):
        raise LlamaUnsupportedError(_last_error(libs, library))
    return library


def _last_error(libs: Libraries, library: Any) -> str:
    return str(libs.ffi.string(library.llama_mtp_last_error()).decode("utf-8", "replace"))


def _check(libs: Libraries, library: Any, status: int) -> None:
    if status != _status("OK"):
        raise _error_type(int(status))(_last_error(libs, library))


def _take_string(libs: Libraries, library: Any, pointer: Any) -> str:
    """The text of a string the wrapper handed out, freed."""
    try:
        return str(libs.ffi.string(pointer).decode("utf-8"))
    finally:
        library.llama_mtp_string_free(pointer)


def json_schema_to_grammar(libs: Libraries, schema: Mapping[str, Any] | bool) -> str:
    """``schema`` (a JSON schema) as llama.cpp's GBNF grammar."""
    library = _wrapper(libs)
    out = libs.ffi.new("char **")
    _check(
        libs, library, library.llama_mtp_json_schema_to_grammar(json.dumps(schema).encode(), out)
    )
    return _take_string(libs, library, out[0])


@dataclass(frozen=True)
class GrammarTrigger:
    """Where a lazy grammar starts constraining: ``kind`` ``word``, ``pattern``,
    ``pattern_full`` (a regular expression over the whole output) or ``token``."""

    kind: str
    value: str
    token: int


@dataclass
class RenderedChat:
    """One rendered request: what to generate after, how to constrain it, how to parse it."""

    prompt: str
    grammar: str
    grammar_lazy: bool
    grammar_triggers: tuple[GrammarTrigger, ...]
    preserved_tokens: tuple[str, ...]
    additional_stops: tuple[str, ...]
    format: str
    generation_prompt: str
    supports_thinking: bool
    _handle: NativeObject = field(repr=False)
    _libs: Any = field(repr=False)
    _library: Any = field(repr=False)

    def parse(self, text: str, *, partial: bool = False) -> dict[str, Any]:
        """``text`` generated so far (``partial`` while generation goes on) as an assistant
        message: ``content``, ``reasoning_content`` and ``tool_calls`` (``id``, ``name``,
        ``arguments`` as JSON text)."""
        library = self._library
        out = self._libs.ffi.new("char **")
        status = library.llama_mtp_chat_parse(
            self._handle.pointer, text.encode("utf-8"), int(partial), out
        )
        _check(self._libs, library, status)
        message: dict[str, Any] = json.loads(_take_string(self._libs, library, out[0]))
        return message

    def close(self) -> None:
        self._handle.release()


class ChatTemplates:
    """A model's chat templates (``model``: a loaded llama.cpp model pointer) or ``template``'s
    (Jinja text) instead; llama.cpp uses ChatML when the model has none and none is given."""

    def __init__(self, libs: Libraries, model: Any = None, template: str | None = None) -> None:
        library = _wrapper(libs)
        ffi = libs.ffi
        out = ffi.new("struct llama_mtp_chat_templates **")
        text = template.encode("utf-8") if template is not None else ffi.NULL
        status = library.llama_mtp_chat_templates_init(
            model if model is not None else ffi.NULL, text, out
        )
        _check(libs, library, status)
        self._libs = libs
        self._library = library
        self._handle = NativeObject(
            "chat templates", out[0], library.llama_mtp_chat_templates_free, ffi.NULL
        )
        self._handle.finalize_with(self)

    @property
    def native(self) -> NativeObject:
        """The templates' native object."""
        return self._handle

    def info(self) -> dict[str, Any]:
        """``source`` (the template's text), ``caps`` (llama.cpp's capability names) and
        ``supports_thinking``."""
        library = self._library
        out = self._libs.ffi.new("char **")
        _check(
            self._libs, library, library.llama_mtp_chat_templates_info(self._handle.pointer, out)
        )
        info: dict[str, Any] = json.loads(_take_string(self._libs, library, out[0]))
        return info

    def apply(self, request: Mapping[str, Any]) -> RenderedChat:
        """Render ``request``: ``messages`` (OpenAI's shape) and optionally ``tools``,
        ``tool_choice``, ``parallel_tool_calls``, ``reasoning_format``, ``enable_thinking``,
        ``chat_template_kwargs``, ``json_schema`` or ``grammar``, ``add_generation_prompt``."""
        libs, library = self._libs, self._library
        chat = libs.ffi.new("struct llama_mtp_chat **")
        out = libs.ffi.new("char **")
        body = json.dumps(dict(request)).encode("utf-8")
        _check(libs, library, library.llama_mtp_chat_apply(self._handle.pointer, body, chat, out))
        handle = NativeObject("rendered chat", chat[0], library.llama_mtp_chat_free, libs.ffi.NULL)
        result = json.loads(_take_string(libs, library, out[0]))
        triggers = tuple(
            GrammarTrigger(t["type"], t["value"], int(t["token"]))
            for t in result["grammar_triggers"]
        )
        rendered = RenderedChat(
            prompt=result["prompt"],
            grammar=result["grammar"],
            grammar_lazy=bool(result["grammar_lazy"]),
            grammar_triggers=triggers,
            preserved_tokens=tuple(result["preserved_tokens"]),
            additional_stops=tuple(result["additional_stops"]),
            format=result["format"],
            generation_prompt=result["generation_prompt"],
            supports_thinking=bool(result["supports_thinking"]),
            _handle=handle,
            _libs=libs,
            _library=library,
        )
        handle.finalize_with(rendered)
        return rendered

    def close(self) -> None:
        self._handle.release()

    def __enter__(self) -> ChatTemplates:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
