"""The ``make-test-model`` verb."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from generator import cli
from generator.commands import make_test_model
from generator.errors import UsageError
from generator.testdrafts import DRAFT_KINDS, write_test_draft
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


@pytest.mark.parametrize("kind", DRAFT_KINDS)
def test_a_draft_kind_writes_the_draft_for_the_target_of_those_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    out = tmp_path / f"{kind}.gguf"
    argv = ["make-test-model", str(out), "--kind", kind, "--seed", "4", "--embd", "32"]
    argv += ["--layers", "3", "--vocab", "64", "--disagree-every", "3"]
    assert _run(argv) == 0
    assert Path(capsys.readouterr().out.splitlines()[-1]) == out
    expected = write_test_draft(
        tmp_path / "api.gguf", kind, 4, embd=32, layers=3, vocab=64, disagree_every=3
    )
    assert out.read_bytes() == expected.read_bytes()
    other_seed = write_test_draft(
        tmp_path / "seed0.gguf", kind, 0, embd=32, layers=3, vocab=64, disagree_every=3
    )
    if kind != "eagle3":  # the one kind that carries none of the target's rows
        assert out.read_bytes() != other_seed.read_bytes()


def test_a_draft_takes_the_vocabulary_option(tmp_path: Path) -> None:
    out = tmp_path / "bytes.gguf"
    argv = ["make-test-model", str(out), "--kind", "dflash", "--vocabulary", "bytes"]
    assert _run([*argv, "--vocab", "259"]) == 0
    expected = write_test_draft(tmp_path / "api.gguf", "dflash", vocabulary="bytes", vocab=259)
    assert out.read_bytes() == expected.read_bytes()
    assert read_model(out).fields["tokenizer.ggml.model"] == "llama"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--chat-template", "{{ x }}"], "no chat template"),
        (["--weight-type", "f16"], "f32 only"),
        (["--vocab", "4"], "vocab must be at least 8"),
    ],
)
def test_what_a_draft_cannot_have_is_a_usage_error(
    tmp_path: Path, options: list[str], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        _run(["make-test-model", str(tmp_path / "d.gguf"), "--kind", "eagle3", *options])
    assert list(tmp_path.iterdir()) == []
