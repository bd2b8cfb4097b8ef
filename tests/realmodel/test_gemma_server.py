"""``llama-bindings serve`` on Gemma 3 270M Q4_K_M, talked to with the official ``openai``
client on loopback: eight concurrent clients (chat and completions, streamed or not) get what
each gets alone, with n-gram speculation (ngram-mod; plain decoding beside others is
test_slots.py's on the synthetic models); with Qwen 3's template (upstream's, from the pinned
tree) a required tool call comes back as OpenAI's ``tool_calls``, its arguments valid for the
tool (JSON schemas on Gemma: test_gemma_chat_layer.py, in-process).

The server runs on weights that are not repacked and one token per micro-batch (``--no-repack
--ubatch-size 1``): then a token's logits do not depend on what else the batch holds (see
test_gemma_chat.py), and a reply served beside others must equal the reply served alone."""

from __future__ import annotations

import json
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
        "--model", str(gemma_model), "--alias", "gemma", "--slots", "4", "--ctx-size", "1024",
        "--no-repack", "--ubatch-size", "1", "--speculative", "ngram-mod",
        "--chat-template-file", str(template),
    ]  # fmt: skip
    log = tmp_path_factory.mktemp("gemma-server") / "server.log"
    with live_server(host_build.lib_dir, args, log) as live:
        yield openai.OpenAI(base_url=f"{live.base_url}/v1", api_key="-", max_retries=0)


def _ask(client: openai.OpenAI, i: int) -> str:
    question = QUESTIONS[i % len(QUESTIONS)]
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


def test_eight_concurrent_clients_get_what_each_gets_alone(server: openai.OpenAI) -> None:
    alone = [_ask(server, i) for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda i: _ask(server, i), range(8)))
    assert together == alone
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
