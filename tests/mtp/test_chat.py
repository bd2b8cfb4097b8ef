"""Chat: the model's GGUF template or one given, rendered by llama.cpp's chat layer (Jinja), or
by llama_chat_apply_template when a builtin format is named. (Tools, schemas, reasoning and
streaming deltas through the layer: test_chat_runtime.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.mtp.conftest import CHATML_JINJA, mtp_spec

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Say \u20ac."},
]


def _chatml(messages: list[dict[str, str]]) -> str:
    """The chatml format, written out from its definition."""
    turns = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return turns + "<|im_start|>assistant\n"


def test_template_from_the_gguf(runtime: Any, libs: Any, byte_models: dict[str, Path]) -> None:
    with runtime.Model(byte_models["agree"], libs=libs) as model:
        assert model.chat_template == CHATML_JINJA
        assert model.apply_chat_template(MESSAGES) == _chatml(MESSAGES)
        message_objects = [runtime.ChatMessage(m["role"], m["content"]) for m in MESSAGES]
        assert model.apply_chat_template(message_objects) == _chatml(MESSAGES)
        without_prompt = model.apply_chat_template(MESSAGES, add_generation_prompt=False)
        assert without_prompt == _chatml(MESSAGES).removesuffix("<|im_start|>assistant\n")
        prompt = model.tokenize(_chatml(MESSAGES), parse_special=True)
        with runtime.Context(model, n_ctx=256) as ctx:
            reply = ctx.chat(MESSAGES, max_tokens=10)
            direct = ctx.generate(prompt, max_tokens=10)
            deltas = list(ctx.stream_chat(MESSAGES, max_tokens=10))
            builtin = ctx.chat(MESSAGES, template="chatml", max_tokens=10)
    assert reply.renderer == "chat-layer" and builtin.renderer == "builtin-template"
    assert reply.tokens == direct.tokens == builtin.tokens and len(reply.tokens) == 10
    assert reply.metrics.prompt_tokens == len(prompt)
    assert "".join(d.text for d in deltas) == reply.text == direct.text
    # chatml's format is content alone; the builtin renderer parses nothing
    assert "".join(d.content for d in deltas) == reply.content == reply.text
    assert builtin.content == builtin.text and builtin.tool_calls == reply.tool_calls == ()


def test_chat_with_mtp_equals_without(
    runtime: Any, libs: Any, byte_models: dict[str, Path]
) -> None:
    with runtime.Model(byte_models["agree"], libs=libs) as model:
        with runtime.Context(model, n_ctx=256) as ctx:
            plain = ctx.chat(MESSAGES, max_tokens=16)
    with runtime.Model(byte_models["agree"], load_mtp=True, libs=libs) as model:
        with runtime.Context(model, n_ctx=256, speculative=mtp_spec(runtime)) as ctx:
            mtp = ctx.chat(MESSAGES, max_tokens=16)
    assert mtp.tokens == plain.tokens and mtp.text == plain.text
    assert mtp.metrics.mtp and mtp.metrics.drafted_tokens > 0


def test_template_given(runtime: Any, libs: Any, byte_models: dict[str, Path]) -> None:
    with runtime.Model(byte_models["plain"], libs=libs) as model:
        assert model.chat_template is None
        assert model.apply_chat_template(MESSAGES, template="chatml") == _chatml(MESSAGES)
        assert model.apply_chat_template(MESSAGES, template=CHATML_JINJA) == _chatml(MESSAGES)
        with runtime.Context(model, n_ctx=256) as ctx:
            reply = ctx.chat(MESSAGES, template="chatml", max_tokens=6)
            direct = ctx.generate(model.tokenize(_chatml(MESSAGES), parse_special=True),
                                  max_tokens=6)  # fmt: skip
    assert reply.tokens == direct.tokens


def test_no_template_is_a_clear_error(
    runtime: Any, libs: Any, byte_models: dict[str, Path]
) -> None:
    with runtime.Model(byte_models["plain"], libs=libs) as model:
        with pytest.raises(runtime.ChatTemplateError, match="no chat template"):
            model.apply_chat_template(MESSAGES)
        with runtime.Context(model, n_ctx=64) as ctx:
            with pytest.raises(runtime.ChatTemplateError, match="pass template="):
                ctx.chat(MESSAGES)
        with pytest.raises(runtime.ChatTemplateError, match="does not support"):
            model.apply_chat_template(MESSAGES, template="{{ no known markers }}")
        with pytest.raises(ValueError, match="'role' and 'content'"):
            model.apply_chat_template([{"role": "user"}], template="chatml")
