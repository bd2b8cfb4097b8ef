"""The server's settings and request checks, with nothing native: flags over a TOML file, the
key from the environment, and OpenAI bodies refused naming their field."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.conftest import committed_runtime


@pytest.fixture(scope="module")
def server() -> Any:
    committed_runtime()  # generated/ on sys.path
    return importlib.import_module("llama_bindings.server.requests")


@pytest.fixture(scope="module")
def config() -> Any:
    committed_runtime()
    return importlib.import_module("llama_bindings.server.config")


def test_flags_win_over_the_toml_file(config: Any, tmp_path: Path) -> None:
    settings = tmp_path / "serve.toml"
    settings.write_text('model = "m.gguf"\nslots = 8\nport = 9000\nlora = ["a.gguf:0.5"]\n')
    parsed = config.parse_config(["--config", str(settings), "--port", "9001"], environ={})
    assert (parsed.model, parsed.slots, parsed.port, parsed.lora) == (
        "m.gguf",
        8,
        9001,
        ("a.gguf:0.5",),
    )
    assert parsed.host == "127.0.0.1" and parsed.api_key is None and parsed.model_id == "m"
    assert config.lora_of("a.gguf:0.5") == ("a.gguf", 0.5)
    assert config.lora_of("C:/x/a.gguf") == ("C:/x/a.gguf", 1.0)


def test_the_key_comes_from_the_environment_unless_given(config: Any) -> None:
    env = {config.API_KEY_VARIABLE: "from-env"}
    assert config.parse_config(["-m", "m.gguf"], environ=env).api_key == "from-env"
    assert config.parse_config(["-m", "m.gguf", "--api-key", "k"], environ=env).api_key == "k"
    assert "from-env" not in repr(config.parse_config(["-m", "m.gguf"], environ=env))


@pytest.mark.parametrize(
    ("argv", "toml", "message"),
    [
        ([], None, "a model is needed"),
        (["-m", "m.gguf", "--slots", "0"], None, "slots must be >= 1"),
        ([], 'model = "m.gguf"\nslot = 2\n', "unknown setting"),
        (["-m", "m", "--chat-template", "chatml", "--chat-template-file", "t"], None, "not both"),
        (["-m", "m", "--speculative", "ngram-mod+eagle"], None, "unknown speculative mode 'eagle'"),
    ],
)
def test_wrong_settings(
    config: Any, tmp_path: Path, argv: list[str], toml: str | None, message: str
) -> None:
    if toml is not None:
        (tmp_path / "s.toml").write_text(toml)
        argv = [*argv, "--config", str(tmp_path / "s.toml")]
    with pytest.raises(ValueError, match=message):
        config.parse_config(argv, environ={})


def test_a_chat_body_becomes_options(server: Any) -> None:
    body = {
        "model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
        "max_completion_tokens": 9, "temperature": 0, "user": "ignored", "n": 1,
    }  # fmt: skip
    checked = server.check_chat(body, "m")
    assert checked.stream is True and checked.input == body["messages"]
    assert checked.options == {"max_tokens": 9, "temperature": 0, "model": "m"}


@pytest.mark.parametrize(
    ("body", "param", "status"),
    [
        ({"messages": []}, "messages", 400),
        ({"messages": [1]}, "messages", 400),
        ({"model": "other", "messages": [{}]}, "model", 404),
        ({"messages": [{}], "max_tokens": 0}, "max_tokens", 400),
        ({"messages": [{}], "max_tokens": True}, "max_tokens", 400),
        ({"messages": [{}], "top_p": 1.5}, "top_p", 400),
        ({"messages": [{}], "stream": "yes"}, "stream", 400),
        ({"messages": [{}], "stop": [1]}, "stop", 400),
        ({"messages": [{}], "n": 3}, "n", 400),
        ({"messages": [{}], "logprobs": 2}, "logprobs", 400),
        ({"messages": [{}], "functions": []}, "functions", 400),
        ({"messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "/etc/passwd"}}]}]}, "messages", 400),
    ],
)  # fmt: skip
def test_bad_chat_bodies(server: Any, body: dict[str, Any], param: str, status: int) -> None:
    with pytest.raises(server.BadRequest) as refused:
        server.check_chat(body, "m")
    assert (refused.value.param, refused.value.status) == (param, status)


def test_completion_and_embedding_inputs(server: Any) -> None:
    assert server.check_completion({"prompt": ["abc"]}, "m").input == "abc"
    assert server.check_completion({"prompt": [1, 2]}, "m").input == [1, 2]
    assert server.check_embeddings({"input": [1, 2]}, "m") == ([[1, 2]], "float")
    assert server.check_embeddings({"input": ["a", "b"], "encoding_format": "base64"}, "m") == (
        ["a", "b"], "base64",
    )  # fmt: skip
    for bad in ({"prompt": ["a", "b"]}, {"prompt": ""}, {"prompt": [True]}):
        with pytest.raises(server.BadRequest):
            server.check_completion(bad, "m")
    for bad in (
        {"input": ""},
        {"input": [[]]},
        {"input": {"a": 1}},
        {"input": "a", "dimensions": 8},
    ):
        with pytest.raises(server.BadRequest):
            server.check_embeddings(bad, "m")


@pytest.mark.parametrize(("extra", "warned"), [([], True), (["--api-key", "k"], False)])
def test_a_non_loopback_bind_without_a_key_warns(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: list[str], warned: bool
) -> None:
    """The warning comes before anything loads; a model that is not there then ends the command
    with its reason (1), never a bound port."""
    committed_runtime()
    main = importlib.import_module("llama_bindings.server.cli").main
    missing = str(tmp_path / "none.gguf")
    assert main(["--model", missing, "--host", "0.0.0.0", *extra]) == 1
    err = capsys.readouterr().err
    assert ("WARNING: serving on 0.0.0.0" in err) is warned
    assert err.splitlines()[-1].startswith("llama-bindings serve: ")  # the reason
    assert "serving 'none'" not in err  # nothing was served


def test_ggml_threads_sleep_while_waiting_when_they_take_every_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    committed_runtime()
    cli = importlib.import_module("llama_bindings.server.cli")
    monkeypatch.setattr(cli.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(cli.os, "cpu_count", lambda: 2)
    assert cli.yielding_threads(None, {})  # the default: min(4, CPUs) = 2, every CPU
    assert cli.yielding_threads(2, {}) and cli.yielding_threads(3, {})
    assert not cli.yielding_threads(1, {})  # a core left over
    assert not cli.yielding_threads(2, {"OMP_WAIT_POLICY": "ACTIVE"})  # the user's choice
    monkeypatch.setattr(cli.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    monkeypatch.setattr(cli.os, "cpu_count", lambda: 16)
    assert not cli.yielding_threads(None, {})  # 4 threads of 16 CPUs
