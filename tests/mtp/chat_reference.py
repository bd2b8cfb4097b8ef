"""An independent reference for chat templates: the template run by jinja2's sandbox the way
transformers' ``apply_chat_template`` runs it (``ImmutableSandboxedEnvironment`` with
``trim_blocks`` and ``lstrip_blocks``, the loop controls, a ``tojson`` that keeps non-ASCII text,
``raise_exception``, ``strftime_now``, and the ``{% generation %}`` block transformers adds), given
the variables llama.cpp's chat layer gives every template (read from ``common/chat.cpp`` of the
pinned tree: ``common_chat_template_direct_apply_impl`` and ``common_chat_extra_context``):
``messages``, ``bos_token`` and ``eos_token`` (empty for a template given as text),
``enable_thinking`` (llama.cpp's default: true), ``add_generation_prompt``, ``tools`` when there
are any, and the date as ``datetime`` (``%b %d %Y``) and ``date_string`` (``%d %b %Y``).

A test dependency only (jinja2); the runtime never renders a template itself."""

from __future__ import annotations

import datetime
import json
from typing import Any, ClassVar

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationBlock(Extension):
    """transformers' ``{% generation %} ... {% endgeneration %}``: marks the assistant's text for
    training masks; rendering gives its body unchanged."""

    tags: ClassVar[set[str]] = {"generation"}

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def _raise(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def llama_variables(now: datetime.datetime) -> dict[str, Any]:
    """What llama.cpp gives every template besides the messages and tools."""
    return {
        "bos_token": "",
        "eos_token": "",
        "enable_thinking": True,
        "add_generation_prompt": True,
        "datetime": now.strftime("%b %d %Y"),
        "date_string": now.strftime("%d %b %Y"),
    }


def render(source: str, messages: list[dict[str, Any]], **variables: Any) -> str:
    """``source`` rendered for ``messages`` with ``variables`` (see :func:`llama_variables`)."""
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=["jinja2.ext.loopcontrols", GenerationBlock],
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    return env.from_string(source).render(messages=messages, **variables)
