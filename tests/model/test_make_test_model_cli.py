"""The ``make-test-model`` verb."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from generator import cli
from generator.commands import make_test_model
from generator.testmodel import write_test_model
from tests.model.conftest import read_model


def _run(argv: list[str]) -> int:
    """Run the verb through its own registration (the CLI's other verbs are not needed here)."""
    parser = argparse.ArgumentParser(prog="llama-bindgen")
    subparsers = parser.add_subparsers(dest="command", required=True)
    make_test_model.register(subparsers)
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


def test_verb_is_registered() -> None:
    assert "generator.commands.make_test_model" in cli.COMMAND_MODULES


def test_writes_the_file_and_prints_its_path_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sub" / "partial.gguf"
    argv = ["make-test-model", str(out), "--kind", "partial", "--seed", "4"]
    argv += ["--embd", "32", "--layers", "3", "--vocab", "64", "--disagree-every", "3"]
    assert _run(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert Path(lines[-1]) == out
    expected = write_test_model(
        tmp_path / "api.gguf", "partial", 4, embd=32, layers=3, vocab=64, disagree_every=3
    )
    assert out.read_bytes() == expected.read_bytes()
    fields = read_model(out).fields
    assert fields["qwen35.embedding_length"] == 32
    assert fields["qwen35.block_count"] == 4


def test_plain_kind_has_no_nextn_block(tmp_path: Path) -> None:
    out = tmp_path / "plain.gguf"
    assert _run(["make-test-model", str(out), "--kind", "plain"]) == 0
    model = read_model(out)
    assert "qwen35.nextn_predict_layers" not in model.fields
    assert not [name for name in model.shapes if ".nextn." in name]


def test_unknown_kind_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        _run(["make-test-model", str(tmp_path / "m.gguf"), "--kind", "sometimes"])
    assert not (tmp_path / "m.gguf").exists()


def test_vocabulary_and_chat_template_options(tmp_path: Path) -> None:
    out = tmp_path / "bytes.gguf"
    argv = ["make-test-model", str(out), "--vocabulary", "bytes", "--vocab", "259"]
    assert _run([*argv, "--chat-template", "{{ x }}"]) == 0
    expected = write_test_model(
        tmp_path / "api.gguf", "agree", vocabulary="bytes", vocab=259, chat_template="{{ x }}"
    )
    assert out.read_bytes() == expected.read_bytes()
    assert read_model(out).fields["tokenizer.chat_template"] == "{{ x }}"
