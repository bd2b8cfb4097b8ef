"""``llama-bindings serve --deterministic`` on Gemma 3 270M Q4_K_M, talked to with the official
``openai`` client on loopback: sixteen concurrent clients (chat and completions, streamed or not)
on eight slots get what each gets alone, with n-gram speculation (ngram-mod), on prompts no one
chose (sentences drawn at random from the pinned tree's documentation, the seed in the failure
message) beside four fixed questions; with Qwen 3's template (upstream's, from the pinned tree) a
required tool call comes back as OpenAI's ``tool_calls``, its arguments valid for the tool (JSON
schemas on Gemma: test_gemma_chat_layer.py, in-process).

``--deterministic`` decodes one token per pass (a token's logits then do not depend on what else
the batch holds: test_gemma_chat.py) in a KV buffer per slot (a slot's attention then sums over
its own cells in the same order: with one buffer for every slot, 12 of 16 such replies were
equal to their reply alone, 2026-12-07)."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pytest

from generator.native.build import BuildResult
from tests.mtp.live_server import live_server
from tests.realmodel.test_gemma_chat_layer import ASK, TOOLS

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

QUESTIONS = ("What is the capital of France?", "Name a colour.", "Count to five.", "Say hello.")


@pytest.fixture(scope="module")
def server(
    host_build: BuildResult,
    gemma_model: Path,
    tree_pin: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[openai.OpenAI]:
    template = tree_pin / "models" / "templates" / "Qwen-Qwen3-0.6B.jinja"
    args = [
        "--model", str(gemma_model), "--alias", "gemma", "--slots", "8", "--ctx-size", "512",
        "--deterministic", "--speculative", "ngram-mod",
        "--chat-template-file", str(template),
    ]  # fmt: skip
    log = tmp_path_factory.mktemp("gemma-server") / "server.log"
    with live_server(host_build.lib_dir, args, log) as live:
        yield openai.OpenAI(base_url=f"{live.base_url}/v1", api_key="-", max_retries=0)


def drawn_sentences(tree: Path, count: int, seed: int) -> list[str]:
    """``count`` sentences of prose drawn from the tree's ``docs/`` Markdown with ``seed``."""
    found: set[str] = set()
    for page in sorted((tree / "docs").rglob("*.md")):
        for line in page.read_text(encoding="utf-8", errors="replace").splitlines():
            for sentence in re.split(r"(?<=[.?!])\s+", line.strip()):
                if 30 <= len(sentence) <= 160 and re.fullmatch(
                    r"[A-Z][A-Za-z ,'()-]+[.?!]", sentence
                ):
                    found.add(sentence)
    return random.Random(seed).sample(sorted(found), count)


def _ask(client: openai.OpenAI, i: int, question: str) -> str:
    if i % 3 == 0:
        return (
            client.completions.create(
                model="gemma", prompt=f"Q: {question}\nA:", max_tokens=16, temperature=0
            )
            .choices[0]
            .text
        )
    messages: Any = [{"role": "user", "content": question}]
    options: Any = {"model": "gemma", "messages": messages, "max_tokens": 16, "temperature": 0}
    if i % 3 == 1:
        return client.chat.completions.create(**options).choices[0].message.content or ""
    return "".join(
        c.delta.content or ""
        for chunk in client.chat.completions.create(**options, stream=True)
        for c in chunk.choices
    )


def test_sixteen_concurrent_clients_get_what_each_gets_alone(
    server: openai.OpenAI, tree_pin: Path
) -> None:
    seed = random.randrange(2**32)
    prompts = [*QUESTIONS, *drawn_sentences(tree_pin, 12, seed)]
    alone = [_ask(server, i, prompt) for i, prompt in enumerate(prompts)]
    with ThreadPoolExecutor(len(prompts)) as pool:
        together = list(pool.map(lambda item: _ask(server, *item), enumerate(prompts)))
    unequal = [(p, a, t) for p, a, t in zip(prompts, alone, together, strict=True) if a != t]
    assert not unequal, f"seed {seed}: {len(unequal)} of {len(prompts)} differ: {unequal}"
    assert all(text.strip() for text in together)


def test_a_required_tool_call(server: openai.OpenAI) -> None:
    called = server.chat.completions.create(
        model="gemma", max_tokens=80, temperature=0, tools=TOOLS, tool_choice="required",
        messages=ASK, extra_body={"reasoning": False},  # Qwen 3's thinking switch
    )  # fmt: skip
    calls = called.choices[0].message.tool_calls or []
    assert calls and called.choices[0].message.content is None
    for call in calls:
        assert call.function.name == "get_weather" and call.id
        jsonschema.validate(json.loads(call.function.arguments), TOOLS[0]["function"]["parameters"])
