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


def _listed(value: Any) -> Any:
    """``value`` with its iterators (a generator from ``map``) made lists, inside too."""
    if isinstance(value, dict):
        return {k: _listed(v) for k, v in value.items()}
    if isinstance(value, list | tuple) or (
        hasattr(value, "__next__") and not isinstance(value, str | bytes)
    ):
        return [_listed(v) for v in value]
    return value


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


class EmptyUndefined(jinja2.ChainableUndefined):
    """An undefined value as llama.cpp's Jinja engine treats one: its attributes are undefined
    too, it prints and adds as nothing, and iterates as nothing (jinja2's raises on ``+``)."""

    def __add__(self, other: Any) -> Any:
        return other

    def __radd__(self, other: Any) -> Any:
        return other


# Where jinja2 and llama.cpp's Jinja engine differ in the language itself (not in the request),
# the quirks a template's explanation may switch on in the reference.
QUIRKS = frozenset({"undefined is empty", "safe is text", "filters give lists"})


def render(
    source: str,
    messages: list[dict[str, Any]],
    quirks: frozenset[str] = frozenset(),
    **variables: Any,
) -> str:
    """``source`` rendered for ``messages`` with ``variables`` (see :func:`llama_variables`), as
    jinja2 runs it, but for ``quirks`` (of :data:`QUIRKS`): "undefined is empty" (llama.cpp's
    undefined values), "safe is text" (jinja2's ``safe`` makes Markup, and Markup + text
    HTML-escapes the text; llama.cpp has no Markup), "filters give lists" (jinja2's ``map`` gives
    a generator, which ``tojson`` refuses; llama.cpp's gives a list)."""
    assert quirks <= QUIRKS, quirks - QUIRKS
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=["jinja2.ext.loopcontrols", GenerationBlock],
        undefined=EmptyUndefined if "undefined is empty" in quirks else jinja2.Undefined,
    )
    if "filters give lists" in quirks:
        env.filters["tojson"] = lambda value, **kw: _tojson(_listed(value), **kw)
    else:
        env.filters["tojson"] = _tojson
    if "safe is text" in quirks:
        env.filters["safe"] = str
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    return env.from_string(source).render(messages=messages, **variables)
