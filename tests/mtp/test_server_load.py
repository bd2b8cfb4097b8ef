"""``llama-bindings serve`` under bounded load on loopback, on the synthetic model: 128
concurrent clients against 4 slots and ``--max-waiting 128`` are all answered; 32 streaming
clients queued behind a long stream (2,000 tokens: seconds here) that disconnect leave the
queue while that stream still runs, and their places are taken again."""

from __future__ import annotations

import http.client
import json
import re
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import pytest

from generator.native.build import BuildResult
from tests.mtp.live_server import LiveServer, live_server
from tests.mtp.test_server import USER, bytes_models, chatml_file  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

QUEUED = 32
POLLS = 1200  # 50 ms apart: a minute at most for the server to get where a test waits for it


def _serve(
    host_build: BuildResult, model: Path, template: Path, folder: Path, *flags: str
) -> Iterator[LiveServer]:
    args = ["--model", str(model), "--alias", "tiny", "--chat-template-file", str(template),
            *flags]  # fmt: skip
    with live_server(host_build.lib_dir, args, folder / "server.log") as live:
        yield live


@pytest.fixture(scope="module")
def four_slots(
    host_build: BuildResult,
    bytes_models: dict[str, Path],  # noqa: F811
    chatml_file: Path,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("four-slots")
    yield from _serve(host_build, bytes_models["partial"], chatml_file, folder,
                      "--slots", "4", "--ctx-size", "512", "--max-waiting", "128")  # fmt: skip


@pytest.fixture(scope="module")
def one_slot(
    host_build: BuildResult,
    bytes_models: dict[str, Path],  # noqa: F811
    chatml_file: Path,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("one-slot")
    yield from _serve(host_build, bytes_models["partial"], chatml_file, folder, "--slots", "1",
                      "--ctx-size", "2048", "--max-waiting", str(QUEUED))  # fmt: skip


def test_128_clients_on_4_slots_are_all_answered(four_slots: LiveServer) -> None:
    client = openai.OpenAI(base_url=f"{four_slots.base_url}/v1", api_key="-", max_retries=0,
                           timeout=300)  # fmt: skip

    def ask(i: int) -> str | None:
        messages = [{"role": "user", "content": f"Question {i}: say something."}]
        reply = client.chat.completions.create(
            model="tiny",
            messages=messages,
            max_tokens=8,
            temperature=0,  # type: ignore[arg-type]
        )
        return reply.choices[0].finish_reason

    with ThreadPoolExecutor(128) as pool:
        reasons = list(pool.map(ask, range(128)))
    assert len(reasons) == 128 and all(reason in ("length", "stop") for reason in reasons)
    assert _gauge(four_slots, "llama_bindings_queue_depth") == 0


def _gauge(server: LiveServer, name: str) -> float:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode("utf-8")
    connection.close()
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert found, name
    return float(found[1])


def _ended(server: LiveServer) -> float:
    """Requests the slots ended (every slot's)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode("utf-8")
    connection.close()
    return sum(float(n) for n in re.findall(r"^llama_bindings_requests_total\{[^}]*\} (\S+)$",
                                            text, re.MULTILINE))  # fmt: skip


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    for _ in range(POLLS):
        if condition():
            return
        threading.Event().wait(0.05)
    raise AssertionError(f"the server never got to: {what}")


def _open_stream(server: LiveServer, max_tokens: int) -> tuple[http.client.HTTPConnection, int]:
    """A streaming chat request whose answer's headers have come (its status)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    body = {"model": "tiny", "messages": USER, "max_tokens": max_tokens, "temperature": 0,
            "stream": True}  # fmt: skip
    connection.request("POST", "/v1/chat/completions", body=json.dumps(body))
    answer = connection.getresponse()
    if answer.status != 200:
        answer.read()
    return connection, answer.status


def test_queued_streaming_clients_that_leave_free_their_places_at_once(
    one_slot: LiveServer,
) -> None:
    long_connection = http.client.HTTPConnection("127.0.0.1", one_slot.port, timeout=120)
    # a completion with its end-of-sequence token banned: it runs to max_tokens
    body = {"model": "tiny", "prompt": "Once upon a time", "max_tokens": 2000, "temperature": 0,
            "logit_bias": {"2": -100}, "stream": True,
            "stream_options": {"include_usage": True}}  # fmt: skip
    long_connection.request("POST", "/v1/completions", body=json.dumps(body))
    long_answer = long_connection.getresponse()
    assert long_answer.status == 200
    while not long_answer.readline().startswith(b"data: "):
        pass  # the long stream runs in the only slot
    ended = _ended(one_slot)
    queued = [_open_stream(one_slot, 8) for _ in range(QUEUED)]
    assert all(status == 200 for _, status in queued)
    _wait_for(lambda: _gauge(one_slot, "llama_bindings_queue_depth") == QUEUED, "32 waiting")
    _, refused = _open_stream(one_slot, 8)
    assert refused == 503  # the queue is full
    for connection, _ in queued:
        connection.close()
    _wait_for(lambda: _gauge(one_slot, "llama_bindings_queue_depth") == 0, "an empty queue")
    # the queue emptied while the long stream still ran (no request ended since: a request a
    # slot took would have ended there, and the long one ends only after it): they left
    assert _ended(one_slot) == ended
    assert _gauge(one_slot, "llama_bindings_slots_busy") == 1
    again = [_open_stream(one_slot, 8) for _ in range(QUEUED)]
    assert all(status == 200 for _, status in again)  # every place is free again
    for connection, _ in again:
        connection.close()
    rest = long_answer.read().decode("utf-8")
    long_connection.close()
    usage = [json.loads(line[6:]) for line in rest.splitlines() if line.startswith("data: {")]
    assert usage and usage[-1]["usage"]["completion_tokens"] == 2000
    assert rest.rstrip().endswith("data: [DONE]")
