"""``llama-bindings serve`` on the synthetic models, talked to with the official ``openai`` client
and raw HTTP on loopback: every endpoint; 16 concurrent clients with mixed requests, each
answer equal to the same request served alone; a client that leaves mid-stream; bad requests
answered 4xx in OpenAI's shape while the server keeps serving; a full queue answered 503; the
API key; SIGTERM letting a running stream finish. Expected outputs are computed in the same test
(the same request alone, or the runtime in-process)."""

from __future__ import annotations

import base64
import contextlib
import http.client
import io
import json
import math
import os
import re
import signal
import struct
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pytest

from generator.native.build import BuildResult
from tests.mtp.conftest import CHATML_JINJA
from tests.mtp.live_server import LiveServer, live_server
from tests.mtp.test_chat_runtime import TOOLS
from tests.mtp.test_media import WHITE
from tests.mtp.test_media import files as files  # the media models and projector
from tests.repo import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.needs_tree]

KEY = "test-key-0123456789"
SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}},
    "required": ["n", "ok"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def bytes_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``bytes`` models (they can write JSON): ``partial`` with an MTP head, ``draft``, and a
    DSpark draft of the target (``dspark-partial``)."""
    from generator.testdrafts import write_test_draft
    from generator.testmodel import BYTES_VOCAB_MIN, write_test_model

    folder = tmp_path_factory.mktemp("server-models")
    common: dict[str, Any] = {"vocabulary": "bytes", "vocab": BYTES_VOCAB_MIN}
    written = {
        kind: write_test_model(folder / f"{kind}.gguf", kind, **common)
        for kind in ("partial", "draft")
    }
    kind = "dspark-partial"
    written[kind] = write_test_draft(folder / f"{kind}.gguf", kind, **common)
    return written


@pytest.fixture(scope="module")
def chatml_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("templates") / "chatml.jinja"
    path.write_text(CHATML_JINJA, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def server(
    host_build: BuildResult,
    bytes_models: dict[str, Path],
    chatml_file: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LiveServer]:
    """Four slots with n-gram and MTP speculation, the key from the environment."""
    args = [
        "--model", str(bytes_models["partial"]), "--alias", "tiny", "--slots", "4",
        "--ctx-size", "1024", "--speculative", "ngram-mod+draft-mtp", "--draft-max", "4",
        "--chat-template-file", str(chatml_file), "--max-body-bytes", "65536",
    ]  # fmt: skip
    log = tmp_path_factory.mktemp("server") / "server.log"
    with live_server(host_build.lib_dir, args, log, {"LLAMA_BINDINGS_API_KEY": KEY}) as live:
        yield live


@pytest.fixture(scope="module")
def client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.base_url}/v1", api_key=KEY, max_retries=0)


def _raw(
    server: LiveServer, method: str, path: str, body: bytes | None = None, key: str | None = KEY
) -> tuple[int, dict[str, str], Any]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    connection.request(method, path, body=body, headers=headers)
    answer = connection.getresponse()
    data = answer.read()
    connection.close()
    try:
        parsed: Any = json.loads(data)
    except json.JSONDecodeError:
        parsed = data.decode("utf-8", "replace")
    return answer.status, {k.lower(): v for k, v in answer.getheaders()}, parsed


USER = [{"role": "user", "content": "Say something."}]
WEATHER = [{"role": "user", "content": "Weather?"}]


def test_every_endpoint_with_the_official_client(client: openai.OpenAI) -> None:
    models = client.models.list()
    assert [m.id for m in models.data] == ["tiny"]
    chat = client.chat.completions.create(model="tiny", messages=USER, max_tokens=12, temperature=0)
    choice = chat.choices[0]
    assert choice.finish_reason == "length" and choice.message.content
    assert chat.usage is not None and chat.usage.completion_tokens == 12
    streamed = client.chat.completions.create(
        model="tiny", messages=USER, max_tokens=12, temperature=0, stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    pieces, usage, reasons = [], None, []
    for chunk in streamed:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            pieces.append(c.delta.content or "")
            reasons.append(c.finish_reason)
    assert "".join(pieces) == choice.message.content
    assert reasons[-1] == "length" and usage is not None and usage.completion_tokens == 12
    completion = client.completions.create(
        model="tiny", prompt="abc", max_tokens=8, temperature=0, logprobs=2
    )
    assert completion.choices[0].text and completion.choices[0].logprobs is not None
    assert len(completion.choices[0].logprobs.top_logprobs or []) == 8
    with_logprobs = client.chat.completions.create(
        model="tiny", messages=USER, max_tokens=6, temperature=0, logprobs=True, top_logprobs=2
    )
    content = with_logprobs.choices[0].logprobs
    assert content is not None and content.content is not None
    assert all(len(entry.top_logprobs) == 2 and entry.logprob <= 0 for entry in content.content)
    vectors = client.embeddings.create(model="tiny", input=["abc", "de"])  # base64 by default
    assert [len(v.embedding) for v in vectors.data] == [len(vectors.data[0].embedding)] * 2
    for v in vectors.data:
        assert math.isclose(math.fsum(x * x for x in v.embedding), 1.0, rel_tol=1e-4)
    assert vectors.usage.prompt_tokens > 0


def test_a_json_schema_answer(client: openai.OpenAI) -> None:
    answer = client.chat.completions.create(
        model="tiny", messages=USER, max_tokens=80, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}},
    )  # fmt: skip
    text = answer.choices[0].message.content
    assert text is not None
    jsonschema.validate(json.loads(text), SCHEMA)


def _request(client: openai.OpenAI, i: int) -> tuple[str, str | None]:
    """One of four kinds of request, by ``i``: chat, streamed chat, completion, streamed
    completion (greedy); its text and finish reason."""
    messages = [{"role": "user", "content": f"Request {i % 5}: count."}]
    length = 6 + i % 7
    if i % 4 == 0:
        chat = client.chat.completions.create(
            model="tiny", messages=messages, max_tokens=length, temperature=0
        )
        return chat.choices[0].message.content or "", chat.choices[0].finish_reason
    if i % 4 == 1:
        text, reason = "", None
        for chunk in client.chat.completions.create(
            model="tiny", messages=messages, max_tokens=length, temperature=0, stream=True
        ):
            for c in chunk.choices:
                text += c.delta.content or ""
                reason = c.finish_reason or reason
        return text, reason
    prompt = f"Prompt {i % 3} says"
    if i % 4 == 2:
        done = client.completions.create(
            model="tiny", prompt=prompt, max_tokens=length, temperature=0
        )
        return done.choices[0].text, done.choices[0].finish_reason
    text, reason = "", None
    for chunk in client.completions.create(
        model="tiny", prompt=prompt, max_tokens=length, temperature=0, stream=True
    ):
        text += chunk.choices[0].text
        reason = chunk.choices[0].finish_reason or reason
    return text, reason


def test_sixteen_concurrent_clients_get_what_each_gets_alone(
    client: openai.OpenAI, server: LiveServer
) -> None:
    alone = [_request(client, i) for i in range(16)]
    with ThreadPoolExecutor(16) as pool:
        together = list(pool.map(lambda i: _request(client, i), range(16)))
    assert together == alone
    assert all(text for text, _ in together)
    status, _, metrics = _raw(server, "GET", "/metrics")
    assert (
        status == 200
        and 'llama_bindings_strategy_drafted_tokens_total{strategy="draft-mtp"}' in metrics
    )
    for histogram in ("request_queue_time", "time_to_first_token", "e2e_request_latency"):
        count = re.search(rf"llama_bindings_{histogram}_seconds_count (\S+)", metrics)
        assert count and float(count[1]) >= 32, histogram  # these 32 requests, and earlier ones
    per_token = r'llama_bindings_time_per_output_token_seconds_bucket\{le="\+Inf"\} [1-9]'
    assert re.search(per_token, metrics)
    first = re.search(r'position_drafted_tokens_total\{position="1"\} (\S+)', metrics)
    assert first and float(first[1]) > 0
    used = re.findall(r'llama_bindings_kv_cells_used\{slot="(\d)"\} (\S+)', metrics)
    assert sorted(int(slot) for slot, _ in used) == [0, 1, 2, 3]
    assert all(float(cells) > 0 for _, cells in used)  # each slot keeps its last request
    # ggml's threads (the default: min(4, CPUs)) sleep while waiting when they take every CPU
    every_cpu = min(4, os.cpu_count() or 1) >= len(os.sched_getaffinity(0))
    expected = every_cpu and "OMP_WAIT_POLICY" not in os.environ
    assert ("OMP_WAIT_POLICY=PASSIVE" in server.output()) == expected


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "waiting"])
def test_a_client_that_leaves(client: openai.OpenAI, server: LiveServer, stream: bool) -> None:
    """A client that leaves (a stream after a few events; a plain request right after sending
    it) cancels its request: its slot generates far fewer tokens than the same request served
    whole, is free again, and the server serves the next request."""
    body = {"model": "tiny", "messages": USER, "max_tokens": 900, "temperature": 0}
    whole = client.chat.completions.create(**body)  # type: ignore[call-overload]
    assert whole.usage is not None and whole.usage.completion_tokens > 100
    before = _metric_sum(server, "llama_bindings_generated_tokens_total")
    ended = _metric_sum(server, "llama_bindings_requests_total")
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    connection.request("POST", "/v1/chat/completions", body=json.dumps({**body, "stream": stream}),
                       headers={"Authorization": f"Bearer {KEY}"})  # fmt: skip
    if stream:
        answer = connection.getresponse()
        assert answer.status == 200
        events = 0
        while events < 3:
            if answer.readline().startswith(b"data: "):
                events += 1
    connection.close()
    for _ in range(600):  # the slots end the request at their next step
        if _metric_sum(server, "llama_bindings_requests_total") > ended:
            break
        threading.Event().wait(0.05)
    left = _metric_sum(server, "llama_bindings_generated_tokens_total") - before
    assert _busy(server) == 0
    assert left < whole.usage.completion_tokens / 2  # 0: cancelled before its first token
    after = client.chat.completions.create(model="tiny", messages=USER, max_tokens=5, temperature=0)
    assert after.choices[0].finish_reason == "length"


def _busy(server: LiveServer) -> float:
    lines = _raw(server, "GET", "/metrics")[2].splitlines()
    return sum(float(m.split()[-1]) for m in lines if m.startswith("llama_bindings_slots_busy "))


def _metric_sum(server: LiveServer, name: str) -> float:
    text = _raw(server, "GET", "/metrics")[2]
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + "{"))


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        (b"{not json", 400, None),
        (b"[1, 2]", 400, None),
        (json.dumps({"model": "tiny"}).encode(), 400, "messages"),
        (json.dumps({"model": "gpt-4o", "messages": USER}).encode(), 404, "model"),
        (json.dumps({"messages": USER, "max_tokens": -1}).encode(), 400, "max_tokens"),
        (json.dumps({"messages": USER, "temperature": "hot"}).encode(), 400, "temperature"),
        (json.dumps({"messages": USER, "n": 2}).encode(), 400, "n"),
        (json.dumps({"messages": USER, "frobnicate": 1}).encode(), 400, "frobnicate"),
        (json.dumps({"messages": USER, "response_format": {"type": "xml"}}).encode(), 400, None),
        (json.dumps({"messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}]}]}).encode(),
         400, "messages"),
        (json.dumps({"messages": USER, "stop": "x" * 70000}).encode(), 413, None),
        (json.dumps({"messages": [{"role": "user", "content": "word " * 300}]}).encode(), 400,
         None),
    ],
)  # fmt: skip
def test_bad_requests_are_4xx_and_the_server_keeps_serving(
    client: openai.OpenAI, server: LiveServer, body: bytes, status: int, param: str | None
) -> None:
    got, _, answer = _raw(server, "POST", "/v1/chat/completions", body)
    assert got == status, answer
    error = answer["error"]
    if b"word word" in body:  # a prompt longer than a slot: the limit is named
        assert "does not fit a slot's 1024 cells" in error["message"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    assert error["param"] == param
    after = client.chat.completions.create(model="tiny", messages=USER, max_tokens=3, temperature=0)
    assert after.choices[0].finish_reason == "length"


def test_the_key(server: LiveServer, client: openai.OpenAI) -> None:
    wrong = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()
    assert _raw(server, "GET", "/v1/models", key=None)[0] == 401
    assert _raw(server, "GET", "/metrics", key=None)[0] == 401
    assert _raw(server, "GET", "/health", key=None)[0] == 200
    assert _raw(server, "GET", "/v1/nothing")[0] == 404


def test_tools_with_a_forced_choice_and_a_full_queue(
    host_build: BuildResult,
    bytes_models: dict[str, Path],
    tree_pin: Path,
    tmp_path: Path,
) -> None:
    """Functionary v3.2's template: a forced tool call comes back as OpenAI's tool_calls; a
    streamed reply the format cannot parse ends with an error event. One slot and no queue:
    while a stream runs, another request is 503 with Retry-After."""
    template = tree_pin / "models" / "templates" / "meetkai-functionary-medium-v3.2.jinja"
    args = ["--model", str(bytes_models["partial"]), "--slots", "1", "--max-waiting", "0",
            "--ctx-size", "2048", "--chat-template-file", str(template)]  # fmt: skip
    with live_server(host_build.lib_dir, args, tmp_path / "server.log") as live:
        tools_client = openai.OpenAI(base_url=f"{live.base_url}/v1", api_key="-", max_retries=0)
        answer = tools_client.chat.completions.create(
            model="partial", messages=WEATHER, tools=TOOLS, max_tokens=60, temperature=0,
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
        )  # fmt: skip
        choice = answer.choices[0]
        assert choice.finish_reason == "tool_calls", answer
        assert choice.message.content is None
        (call,) = choice.message.tool_calls or []
        assert call.function.name == "get_weather" and call.id
        jsonschema.validate(json.loads(call.function.arguments), TOOLS[0]["function"]["parameters"])
        assert answer.usage is not None and answer.usage.completion_tokens < 60
        # without tools the model writes what functionary's format cannot parse: streamed, the
        # refusal comes after the first events, as one last event with OpenAI's error body
        with pytest.raises(openai.APIError, match="peg-native"):
            for _ in tools_client.chat.completions.create(
                model="partial", messages=WEATHER, max_tokens=40, temperature=0, stream=True
            ):
                pass
        body = {"prompt": "abc", "max_tokens": 1500, "temperature": 0, "stream": True}
        connection = http.client.HTTPConnection("127.0.0.1", live.port, timeout=60)
        connection.request("POST", "/v1/completions", body=json.dumps(body))
        running = connection.getresponse()
        assert running.readline().startswith(b"data: ")
        second = json.dumps({"prompt": "abc", "max_tokens": 2}).encode()
        status, headers, refused = _raw(live, "POST", "/v1/completions", second, key=None)
        connection.close()
        assert status == 503 and headers["retry-after"] == "1"
        assert refused["error"]["type"] == "unavailable_error"


def test_sigterm_lets_a_running_stream_finish(
    host_build: BuildResult, bytes_models: dict[str, Path], tmp_path: Path
) -> None:
    """SIGTERM while a stream runs: the stream ends as the same request ends alone, and the
    process shuts down cleanly. The model has no chat template and none is given: the server
    says so when it starts, and completions serve as ever."""
    args = ["--model", str(bytes_models["partial"]), "--slots", "2", "--ctx-size", "2048"]
    body = {"prompt": "abc", "max_tokens": 400, "temperature": 0}
    with live_server(host_build.lib_dir, args, tmp_path / "server.log") as live:
        status, _, alone = _raw(live, "POST", "/v1/completions", json.dumps(body).encode())
        assert status == 200 and alone["usage"]["completion_tokens"] > 50
        connection = http.client.HTTPConnection("127.0.0.1", live.port, timeout=60)
        connection.request("POST", "/v1/completions", body=json.dumps({**body, "stream": True}))
        answer = connection.getresponse()
        assert answer.readline().startswith(b"data: ")
        stopped: list[int] = []
        stopper = threading.Thread(target=lambda: stopped.append(live.stop()))
        stopper.start()
        rest = answer.read().decode()
        stopper.join()
        # uvicorn raises the signal again once it has shut down: the status of SIGTERM
        assert stopped in ([0], [-signal.SIGTERM]), live.output()
        assert "Application shutdown complete" in live.output()
        assert "has no chat template" in live.output()
    events = [json.loads(line[6:]) for line in rest.splitlines() if line.startswith("data: {")]
    streamed = "".join(e["choices"][0]["text"] for e in events)
    assert alone["choices"][0]["text"].endswith(streamed) and len(streamed) > 0
    assert events[-1]["choices"][0]["finish_reason"] == alone["choices"][0]["finish_reason"]
    assert rest.rstrip().endswith("data: [DONE]")


def test_the_embedding_encodings_agree(client: openai.OpenAI, server: LiveServer) -> None:
    """The official client asks for base64 (and decodes it); raw floats are the same vectors."""
    body = json.dumps({"model": "tiny", "input": "abc", "encoding_format": "float"}).encode()
    status, _, floats = _raw(server, "POST", "/v1/embeddings", body)
    body = json.dumps({"model": "tiny", "input": "abc", "encoding_format": "base64"}).encode()
    _, _, packed = _raw(server, "POST", "/v1/embeddings", body)
    decoded = client.embeddings.create(model="tiny", input="abc").data[0].embedding
    assert status == 200
    raw = base64.b64decode(packed["data"][0]["embedding"])
    unpacked = struct.unpack(f"<{len(raw) // 4}f", raw)  # float32: the runtime's vectors are
    assert unpacked == pytest.approx(floats["data"][0]["embedding"], abs=1e-7)  # doubles
    assert decoded == pytest.approx(floats["data"][0]["embedding"], abs=1e-7)


def test_an_image_as_a_data_uri(
    runtime: Any, libs: Any, host_build: BuildResult, files: dict[str, Path], tmp_path: Path
) -> None:
    """A chat with an image part, through the official client, with draft-mtp: the reply equals
    the runtime's own (in-process) for the same request; an image that is no image is a 400."""
    from llama_bindings.openai_format import create_chat_completion

    uri = "data:image/png;base64," + base64.b64encode(WHITE).decode("ascii")
    messages: list[Any] = [{"role": "user", "content": [
        {"type": "text", "text": "what is this? "},
        {"type": "image_url", "image_url": {"url": uri}},
    ]}]  # fmt: skip
    spec = runtime.SpeculativeDecoding(runtime.SpeculativeMode.DRAFT_MTP)
    with runtime.Model(
        files["agree"], libs=libs, load_mtp=True, mmproj=files["projector"]
    ) as model:
        with runtime.Context(model, n_ctx=2048, speculative=spec) as ctx:
            expected = create_chat_completion(ctx, messages, max_tokens=8, temperature=0)
    args = ["--model", str(files["agree"]), "--mmproj", str(files["projector"]),
            "--speculative", "draft-mtp", "--slots", "2", "--ctx-size", "2048"]  # fmt: skip
    with live_server(host_build.lib_dir, args, tmp_path / "server.log") as live:
        seen = openai.OpenAI(base_url=f"{live.base_url}/v1", api_key="-", max_retries=0)
        answer = seen.chat.completions.create(
            model="agree", messages=messages, max_tokens=8, temperature=0
        )
        broken = [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}}
                ],
            }
        ]
        with pytest.raises(openai.BadRequestError, match="not a supported image"):
            seen.chat.completions.create(model="agree", messages=broken, max_tokens=2)
    assert answer.choices[0].message.content == expected["choices"][0]["message"]["content"]
    assert "has no chat template" not in live.output()  # the GGUF's own
    assert answer.usage is not None
    assert answer.usage.prompt_tokens == expected["usage"]["prompt_tokens"]


def test_clients_at_once_with_a_dspark_draft(
    runtime: Any,
    libs: Any,
    host_build: BuildResult,
    bytes_models: dict[str, Path],
    chatml_file: Path,
    tmp_path: Path,
) -> None:
    """``--speculative draft-dspark --draft-model``: three clients at once through the official
    client get the replies of plain decoding in-process, and the metrics count the strategy's
    drafts."""
    from llama_bindings.openai_format import create_chat_completion

    chats = [[{"role": "user", "content": text}] for text in ("abc", "hello", "xyz")]
    template = chatml_file.read_text(encoding="utf-8")
    with runtime.Model(bytes_models["partial"], libs=libs) as model:
        with runtime.Context(model, n_ctx=1024) as ctx:
            expected = [
                create_chat_completion(ctx, c, max_tokens=16, temperature=0, template=template)
                for c in chats
            ]
    args = ["--model", str(bytes_models["partial"]), "--slots", "3", "--ctx-size", "3072",
            "--speculative", "draft-dspark", "--draft-model", str(bytes_models["dspark-partial"]),
            "--draft-max", "4", "--chat-template-file", str(chatml_file)]  # fmt: skip
    with live_server(host_build.lib_dir, args, tmp_path / "server.log") as live:
        seen = openai.OpenAI(base_url=f"{live.base_url}/v1", api_key="-", max_retries=0)
        with ThreadPoolExecutor(len(chats)) as pool:
            answers = list(
                pool.map(
                    lambda chat: seen.chat.completions.create(
                        model="partial", messages=chat, max_tokens=16, temperature=0
                    ),
                    chats,
                )
            )
        connection = http.client.HTTPConnection("127.0.0.1", live.port, timeout=60)
        connection.request("GET", "/metrics")
        metrics = connection.getresponse().read().decode("utf-8")
        connection.close()
    for answer, reference in zip(answers, expected, strict=True):
        assert answer.choices[0].message.content == reference["choices"][0]["message"]["content"]
    drafted = re.search(
        r'llama_bindings_strategy_drafted_tokens_total\{strategy="draft-dspark"\} (\d+)', metrics
    )
    assert drafted is not None and int(drafted.group(1)) > 0, metrics[-2000:]


SERVING = REPO_ROOT / "docs" / "how-to" / "serving.md"


@pytest.mark.parametrize("number", [1, 2])
def test_the_serving_pages_client_examples_run(server: LiveServer, number: int) -> None:
    """The page's ``py`` blocks (the official client's examples) against this live server."""
    blocks = re.findall(r"```py\n(.*?)```", SERVING.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 2
    code = blocks[number - 1].replace("http://127.0.0.1:8080/v1", f"{server.base_url}/v1")
    code = code.replace('api_key="KEY"', f'api_key="{KEY}"')
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"serving.md py block {number}", "exec"), {})
    assert out.getvalue().strip()


def test_slot_save_restore_and_erase(
    host_build: BuildResult, bytes_models: dict[str, Path], chatml_file: Path, tmp_path: Path
) -> None:
    """With draft-mtp: a slot saved to a file (the sidecar's state with the target's), erased,
    restored; the follow-up then reuses what the restored slot holds and answers as it answers
    from scratch. A generating slot is a 409; a path for a file name is a 400."""
    states = tmp_path / "states"
    states.mkdir()
    args = ["--model", str(bytes_models["partial"]), "--slots", "1", "--ctx-size", "2048",
            "--speculative", "draft-mtp", "--slot-save-path", str(states),
            "--chat-template-file", str(chatml_file)]  # fmt: skip

    def post(live: LiveServer, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        status, _, answer = _raw(live, "POST", path, json.dumps(body).encode(), key=None)
        return status, answer

    first = {"prompt": "The first prompt of a slot", "max_tokens": 12, "temperature": 0}
    with live_server(host_build.lib_dir, args, tmp_path / "server.log") as live:
        status, done = post(live, "/v1/completions", first)
        follow = {**first, "prompt": first["prompt"] + done["choices"][0]["text"] + " then"}
        status, saved = post(live, "/slots/0?action=save", {"filename": "one.bin"})
        assert status == 200 and saved["n_saved"] > 0 and (states / "one.bin").is_file()
        status, erased = post(live, "/slots/0?action=erase", {})
        assert status == 200 and erased["n_erased"] == saved["n_saved"]
        reused_before = _metric_sum(live, "llama_bindings_reused_prompt_tokens_total")
        status, restored = post(live, "/slots/0?action=restore", {"filename": "one.bin"})
        assert status == 200 and restored["n_restored"] == saved["n_saved"]
        status, after_restore = post(live, "/v1/completions", follow)
        reused = _metric_sum(live, "llama_bindings_reused_prompt_tokens_total") - reused_before
        post(live, "/slots/0?action=erase", {})
        status, from_scratch = post(live, "/v1/completions", follow)
        assert reused >= saved["n_saved"] - 1
        assert after_restore["choices"][0]["text"] == from_scratch["choices"][0]["text"]
        assert post(live, "/slots/0?action=save", {"filename": "../x"})[0] == 400
        assert post(live, "/slots/0?action=restore", {"filename": "none.bin"})[0] == 404
        assert post(live, "/slots/7?action=erase", {})[0] == 400
        connection = http.client.HTTPConnection("127.0.0.1", live.port, timeout=60)
        body = {"prompt": "abc", "max_tokens": 1500, "stream": True}
        connection.request("POST", "/v1/completions", body=json.dumps(body))
        assert connection.getresponse().readline().startswith(b"data: ")
        status, busy = post(live, "/slots/0?action=save", {"filename": "two.bin"})
        connection.close()
        assert status == 409 and busy["error"]["code"] == "slot_busy"
